package rdmanl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConstantsMatchHeaders compiles a small C probe against the installed
// kernel headers and checks the constants spelled out in message.go.
func TestConstantsMatchHeaders(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to read the kernel headers with")
	}
	if _, err := os.Stat("/usr/include/rdma/rdma_netlink.h"); err != nil {
		t.Skip("no <rdma/rdma_netlink.h> installed")
	}
	consts := []struct {
		c   string
		val int
	}{
		{"NETLINK_RDMA", netlinkRDMA},
		{"NLMSG_HDRLEN", headerLen},
		{"NLA_HDRLEN", attrHdr},
		{"NLMSG_NOOP", typeNoop},
		{"NLMSG_ERROR", typeError},
		{"NLMSG_DONE", typeDone},
		{"NLMSG_OVERRUN", typeOverrun},
		{"NLM_F_REQUEST", flagRequest},
		{"NLM_F_MULTI", flagMulti},
		{"NLM_F_ACK", flagAck},
		{"NLM_F_DUMP_INTR", flagDumpIntr},
		{"NLM_F_DUMP", flagDump},
		{"NLM_F_CAPPED", flagCapped},
		{"NLM_F_ACK_TLVS", flagAckTLVs},
		{"NLA_TYPE_MASK & 0xffff", attrTypeMask},
		{"NLMSGERR_ATTR_MSG", extAckMsg},
		{"RDMA_NL_NLDEV", clientNLDEV},
		{"RDMA_NLDEV_CMD_GET", cmdGet},
		{"RDMA_NLDEV_CMD_NEWLINK", cmdNewLink},
		{"RDMA_NLDEV_CMD_DELLINK", cmdDelLink},
		{"RDMA_NLDEV_CMD_PORT_GET", cmdPortGet},
		{"RDMA_NLDEV_CMD_GET_CHARDEV", cmdChardev},
		{"RDMA_NLDEV_CMD_SYS_GET", cmdSysGet},
		{"RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK", attrSysCopyOnFork},
		{"RDMA_NLDEV_ATTR_CHARDEV_TYPE", attrChardevType},
		{"RDMA_NLDEV_ATTR_CHARDEV_NAME", attrChardevName},
		{"RDMA_NLDEV_ATTR_CHARDEV_ABI", attrChardevABI},
		{"RDMA_NLDEV_ATTR_CHARDEV", attrChardev},
		{"RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID", attrUverbsDriver},
		{"RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_NEWLINK)", int(nldevType(cmdNewLink))},
		{"RDMA_NLDEV_ATTR_DEV_INDEX", attrDevIndex},
		{"RDMA_NLDEV_ATTR_DEV_NAME", attrDevName},
		{"RDMA_NLDEV_ATTR_PORT_INDEX", attrPortIndex},
		{"RDMA_NLDEV_ATTR_FW_VERSION", attrFWVersion},
		{"RDMA_NLDEV_ATTR_NODE_GUID", attrNodeGUID},
		{"RDMA_NLDEV_ATTR_SYS_IMAGE_GUID", attrSysImageGUID},
		{"RDMA_NLDEV_ATTR_PORT_STATE", attrPortState},
		{"RDMA_NLDEV_ATTR_PORT_PHYS_STATE", attrPortPhysState},
		{"RDMA_NLDEV_ATTR_DEV_NODE_TYPE", attrDevNodeType},
		{"RDMA_NLDEV_ATTR_NDEV_INDEX", attrNdevIndex},
		{"RDMA_NLDEV_ATTR_NDEV_NAME", attrNdevName},
		{"RDMA_NLDEV_ATTR_LINK_TYPE", attrLinkType},
		{"RDMA_NLDEV_ATTR_DEV_PROTOCOL", attrDevProtocol},
	}
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <linux/netlink.h>\n#include <rdma/rdma_netlink.h>\nint main(void) {\n")
	for _, c := range consts {
		fmt.Fprintf(&src, "\tprintf(\"%%d\\n\", (int)(%s));\n", c.c)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "probe.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command(cc, "-o", bin, filepath.Join(dir, "probe.c")).CombinedOutput(); err != nil {
		t.Fatalf("compiling the probe: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("running the probe: %v", err)
	}
	var got, want []string
	for i, line := range strings.Fields(string(out)) {
		got = append(got, consts[i].c+" = "+line)
	}
	for _, c := range consts {
		want = append(want, fmt.Sprintf("%s = %d", c.c, c.val))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constants differ from the kernel headers (-want +got):\n%s", diff)
	}
}
