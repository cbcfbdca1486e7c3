// Package examples_test runs the manual's rdma_cm examples (mckey, apm,
// mc, srq) in the VM, against the C programs built from the manual's
// listings and rdma-core's mckey (internal/testutils/examplerun builds
// and runs them).
package examples_test

import (
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }
