package netlink

import (
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }
