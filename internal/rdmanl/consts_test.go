package rdmanl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/netlink"
)

// TestConstantsMatchHeaders compiles a small C probe against the installed
// kernel headers and checks the constants spelled out in message.go and
// in the shared codec (internal/netlink).
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
		{"NLMSG_HDRLEN", netlink.HeaderLen},
		{"NLA_HDRLEN", netlink.AttrHeaderLen},
		{"NLMSG_NOOP", netlink.TypeNoop},
		{"NLMSG_ERROR", netlink.TypeError},
		{"NLMSG_DONE", netlink.TypeDone},
		{"NLMSG_OVERRUN", netlink.TypeOverrun},
		{"NLM_F_REQUEST", netlink.FlagRequest},
		{"NLM_F_MULTI", netlink.FlagMulti},
		{"NLM_F_ACK", netlink.FlagAck},
		{"NLM_F_DUMP_INTR", netlink.FlagDumpIntr},
		{"NLM_F_DUMP", netlink.FlagDump},
		{"NLM_F_CAPPED", netlink.FlagCapped},
		{"NLM_F_ACK_TLVS", netlink.FlagAckTLVs},
		{"NLM_F_REPLACE", netlink.FlagReplace},
		{"NLM_F_EXCL", netlink.FlagExcl},
		{"NLM_F_CREATE", netlink.FlagCreate},
		{"NLA_TYPE_MASK & 0xffff", netlink.AttrTypeMask},
		{"NLMSGERR_ATTR_MSG", netlink.AttrExtAckMsg},
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
		{"RDMA_NLDEV_CMD_RES_GET", cmdResGet},
		{"RDMA_NLDEV_CMD_RES_QP_GET", cmdResQPGet},
		{"RDMA_NLDEV_CMD_RES_CM_ID_GET", cmdResCMIDGet},
		{"RDMA_NLDEV_CMD_RES_CQ_GET", cmdResCQGet},
		{"RDMA_NLDEV_CMD_RES_MR_GET", cmdResMRGet},
		{"RDMA_NLDEV_CMD_RES_PD_GET", cmdResPDGet},
		{"RDMA_NLDEV_CMD_RES_CTX_GET", cmdResCtxGet},
		{"RDMA_NLDEV_CMD_RES_SRQ_GET", cmdResSRQGet},
		{"RDMA_NLDEV_CMD_STAT_GET", cmdStatGet},
		{"RDMA_NLDEV_ATTR_RES_SUMMARY", int(attrResSummary)},
		{"RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY", int(attrResSummaryEntry)},
		{"RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME", int(attrResSummaryName)},
		{"RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR", int(attrResSummaryCurr)},
		{"RDMA_NLDEV_ATTR_RES_QP", int(attrResQP)},
		{"RDMA_NLDEV_ATTR_RES_QP_ENTRY", int(attrResQPEntry)},
		{"RDMA_NLDEV_ATTR_RES_LQPN", int(AttrLQPN)},
		{"RDMA_NLDEV_ATTR_RES_RQPN", int(AttrRQPN)},
		{"RDMA_NLDEV_ATTR_RES_RQ_PSN", int(AttrRQPSN)},
		{"RDMA_NLDEV_ATTR_RES_SQ_PSN", int(AttrSQPSN)},
		{"RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE", int(AttrPathMigState)},
		{"RDMA_NLDEV_ATTR_RES_TYPE", int(AttrType)},
		{"RDMA_NLDEV_ATTR_RES_STATE", int(AttrState)},
		{"RDMA_NLDEV_ATTR_RES_PID", int(AttrPID)},
		{"RDMA_NLDEV_ATTR_RES_KERN_NAME", int(AttrKernName)},
		{"RDMA_NLDEV_ATTR_RES_CM_ID", int(attrResCMID)},
		{"RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY", int(attrResCMIDEntry)},
		{"RDMA_NLDEV_ATTR_RES_PS", int(AttrPS)},
		{"RDMA_NLDEV_ATTR_RES_SRC_ADDR", int(AttrSrcAddr)},
		{"RDMA_NLDEV_ATTR_RES_DST_ADDR", int(AttrDstAddr)},
		{"RDMA_NLDEV_ATTR_RES_CQ", int(attrResCQ)},
		{"RDMA_NLDEV_ATTR_RES_CQ_ENTRY", int(attrResCQEntry)},
		{"RDMA_NLDEV_ATTR_RES_CQE", int(AttrCQE)},
		{"RDMA_NLDEV_ATTR_RES_USECNT", int(AttrUsers)},
		{"RDMA_NLDEV_ATTR_RES_POLL_CTX", int(AttrPollCtx)},
		{"RDMA_NLDEV_ATTR_RES_MR", int(attrResMR)},
		{"RDMA_NLDEV_ATTR_RES_MR_ENTRY", int(attrResMREntry)},
		{"RDMA_NLDEV_ATTR_RES_RKEY", int(AttrRKey)},
		{"RDMA_NLDEV_ATTR_RES_LKEY", int(AttrLKey)},
		{"RDMA_NLDEV_ATTR_RES_IOVA", int(AttrIOVA)},
		{"RDMA_NLDEV_ATTR_RES_MRLEN", int(AttrMRLen)},
		{"RDMA_NLDEV_ATTR_RES_PD", int(attrResPD)},
		{"RDMA_NLDEV_ATTR_RES_PD_ENTRY", int(attrResPDEntry)},
		{"RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY", int(AttrLocalDMALKey)},
		{"RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY", int(AttrUnsafeGlobalRKey)},
		{"RDMA_NLDEV_ATTR_RES_PDN", int(AttrPDN)},
		{"RDMA_NLDEV_ATTR_RES_CQN", int(AttrCQN)},
		{"RDMA_NLDEV_ATTR_RES_MRN", int(AttrMRN)},
		{"RDMA_NLDEV_ATTR_RES_CM_IDN", int(AttrCMIDN)},
		{"RDMA_NLDEV_ATTR_RES_CTXN", int(AttrCtxN)},
		{"RDMA_NLDEV_ATTR_STAT_HWCOUNTERS", int(attrStatHWCounters)},
		{"RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY", int(attrStatHWCounterEntry)},
		{"RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME", int(attrStatHWCounterName)},
		{"RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE", int(attrStatHWCounterValue)},
		{"RDMA_NLDEV_ATTR_DEV_DIM", int(AttrDIM)},
		{"RDMA_NLDEV_ATTR_RES_CTX", int(attrResCtx)},
		{"RDMA_NLDEV_ATTR_RES_CTX_ENTRY", int(attrResCtxEntry)},
		{"RDMA_NLDEV_ATTR_RES_SRQ", int(attrResSRQ)},
		{"RDMA_NLDEV_ATTR_RES_SRQ_ENTRY", int(attrResSRQEntry)},
		{"RDMA_NLDEV_ATTR_RES_SRQN", int(AttrSRQN)},
		{"AF_INET", afInet},
		{"AF_INET6", afInet6},
		{"RDMA_NLDEV_ATTR_MAX <= 128", 1},
	}
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <sys/socket.h>\n#include <linux/netlink.h>\n#include <rdma/rdma_netlink.h>\nint main(void) {\n")
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
