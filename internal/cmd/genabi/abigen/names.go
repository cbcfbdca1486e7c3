package abigen

import (
	"strings"
)

// words maps lower-case C words (the parts of an identifier between
// underscores) to their Go spelling, for initialisms and words that Go
// style capitalizes inside. Every other word is capitalized: "handle" ->
// "Handle". This is the one place to add a spelling.
var words = map[string]string{
	"abi":      "ABI",
	"aes":      "AES",
	"ah":       "AH",
	"av":       "AV",
	"ca":       "CA",
	"cm":       "CM",
	"cq":       "CQ",
	"cqe":      "CQE",
	"cqn":      "CQN",
	"dest":     "Dest",
	"dgid":     "DGID",
	"dlid":     "DLID",
	"dm":       "DM",
	"dma":      "DMA",
	"dmac":     "DMAC",
	"ece":      "ECE",
	"ee":       "EE",
	"esp":      "ESP",
	"fcs":      "FCS",
	"fd":       "FD",
	"fmr":      "FMR",
	"fw":       "FW",
	"gcm":      "GCM",
	"gid":      "GID",
	"gre":      "GRE",
	"grh":      "GRH",
	"guid":     "GUID",
	"hca":      "HCA",
	"hw":       "HW",
	"ib":       "IB",
	"ibdev":    "IBDev",
	"icv":      "ICV",
	"id":       "ID",
	"imm":      "Imm",
	"iova":     "IOVA",
	"ip":       "IP",
	"ipv4":     "IPv4",
	"ipv6":     "IPv6",
	"iv":       "IV",
	"lid":      "LID",
	"lkey":     "LKey",
	"lmc":      "LMC",
	"mac":      "MAC",
	"mi":       "MI",
	"mlid":     "MLID",
	"mminfo":   "MMInfo",
	"mpls":     "MPLS",
	"mr":       "MR",
	"mlx5":     "MLX5",
	"mtu":      "MTU",
	"mw":       "MW",
	"odp":      "ODP",
	"pd":       "PD",
	"pkey":     "PKey",
	"pkeys":    "PKeys",
	"ps":       "PS",
	"psn":      "PSN",
	"qkey":     "QKey",
	"qp":       "QP",
	"qpn":      "QPN",
	"qpt":      "QPT",
	"qpts":     "QPTs",
	"rc":       "RC",
	"rd":       "RD",
	"rdd":      "RDD",
	"rdma":     "RDMA",
	"rkey":     "RKey",
	"rnr":      "RNR",
	"rq":       "RQ",
	"rss":      "RSS",
	"rwq":      "RWQ",
	"rxe":      "RXE",
	"sa":       "SA",
	"siw":      "SIW",
	"sqe":      "SQE",
	"rqe":      "RQE",
	"uresp":    "UResp",
	"ureq":     "UReq",
	"laddr":    "LAddr",
	"raddr":    "RAddr",
	"sge":      "SGE",
	"sgid":     "SGID",
	"sl":       "SL",
	"slid":     "SLID",
	"sm":       "SM",
	"spi":      "SPI",
	"sq":       "SQ",
	"sqd":      "SQD",
	"srq":      "SRQ",
	"srqn":     "SRQN",
	"ssn":      "SSN",
	"tcp":      "TCP",
	"tm":       "TM",
	"tos":      "TOS",
	"ttl":      "TTL",
	"uar":      "UAR",
	"uc":       "UC",
	"ucm":      "UCM",
	"ucontext": "UContext",
	"ud":       "UD",
	"udp":      "UDP",
	"uid":      "UID",
	"va":       "VA",
	"vl":       "VL",
	"vlan":     "VLAN",
	"vxlan":    "VXLAN",
	"wc":       "WC",
	"wq":       "WQ",
	"wqe":      "WQE",
	"wqn":      "WQN",
	"wr":       "WR",
	"xrc":      "XRC",
	"xrcd":     "XRCD",
}

// typePrefixes are stripped from C struct and union tags (first match
// wins), and replaced by a family prefix where the family needs one to
// keep its names apart: ib_uverbs_create_cq -> CreateCQ,
// rdma_ucm_create_id -> UCMCreateID, mlx5_ib_create_qp -> MLX5CreateQP. rxe_ keeps its prefix through the
// word table: rxe_send_wqe -> RXESendWQE.
var typePrefixes = []struct{ c, goPrefix string }{
	{"ib_uverbs_", ""},
	{"rdma_ucm_", "UCM"},
	{"mlx5_ib_", "MLX5"},
}

// goName turns a C identifier into a Go exported name word by word:
// qp_num -> QPNum, wr_id -> WRID, pad_1 -> Pad1. Leading underscores are
// dropped (__data -> Data).
func goName(c string) string {
	var b strings.Builder
	for _, w := range strings.Split(c, "_") {
		if w == "" {
			continue
		}
		if g, ok := words[strings.ToLower(w)]; ok {
			b.WriteString(g)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]))
		b.WriteString(w[1:])
	}
	return b.String()
}

// goTypeName is the Go name of a named C struct or union.
func goTypeName(tag string) string {
	for _, p := range typePrefixes {
		if rest, ok := strings.CutPrefix(tag, p.c); ok {
			return p.goPrefix + goName(rest)
		}
	}
	return goName(tag)
}
