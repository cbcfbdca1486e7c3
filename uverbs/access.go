package uverbs

// Access are memory access rights (ibv_access_flags) for MRs, MWs and QPs.
type Access uint32

const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
	AccessZeroBased    Access = 1 << 5
	AccessOnDemand     Access = 1 << 6
	AccessHugeTLB      Access = 1 << 7
	// AccessFlushGlobal and AccessFlushPersistent let remote FLUSH
	// operations target the memory (kernel 6.2+).
	AccessFlushGlobal     Access = 1 << 8
	AccessFlushPersistent Access = 1 << 9
	// AccessRelaxedOrdering is optional: a kernel or device without it
	// ignores it.
	AccessRelaxedOrdering Access = 1 << 20
)

func (a Access) String() string {
	return flagString(uint64(a), []string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC",
		"MW_BIND", "ZERO_BASED", "ON_DEMAND", "HUGETLB", "FLUSH_GLOBAL", "FLUSH_PERSISTENT",
		"", "", "", "", "", "", "", "", "", "", "RELAXED_ORDERING"})
}
