package uverbs

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPortNumChecks: a port number that is not one of the device's, or
// that does not fit the ABI's byte, fails in QP.Modify (for the fields
// its mask selects) and CreateAH with an error naming the operation and
// the field, before any kernel call: the fake context has no command fd,
// so reaching the kernel would fail otherwise.
func TestPortNumChecks(t *testing.T) {
	c := fakeContext("rxe0", 1)
	qp := &QP{resource: resource{ctx: c, kind: "QP", handle: 1}, typ: QPTypeRC}
	for _, tt := range []struct {
		name string
		attr QPAttr
		mask QPAttrMask
		msg  string
	}{
		{"port 0", QPAttr{}, QPAttrPort, "uverbs QP.Modify: PortNum: rxe0 has no port 0 (its ports are 1 to 1): invalid argument"},
		{"port 2", QPAttr{PortNum: 2}, QPAttrPort, "uverbs QP.Modify: PortNum: rxe0 has no port 2 (its ports are 1 to 1): invalid argument"},
		{"port 257", QPAttr{PortNum: 257}, QPAttrPort, "uverbs QP.Modify: PortNum: rxe0 has no port 257 (its ports are 1 to 1): invalid argument"},
		{"port -1", QPAttr{PortNum: -1}, QPAttrPort | QPAttrState, "uverbs QP.Modify: PortNum: rxe0 has no port -1 (its ports are 1 to 1): invalid argument"},
		{"AV port 0", QPAttr{PortNum: 1}, QPAttrPort | QPAttrAV, "uverbs QP.Modify: AHAttr.PortNum: rxe0 has no port 0 (its ports are 1 to 1): invalid argument"},
		{"alt port 256", QPAttr{AltPortNum: 256, AltAHAttr: AHAttr{PortNum: 1}}, QPAttrAltPath,
			"uverbs QP.Modify: AltPortNum: rxe0 has no port 256 (its ports are 1 to 1): invalid argument"},
		{"alt AV port 0", QPAttr{AltPortNum: 1}, QPAttrAltPath, "uverbs QP.Modify: AltAHAttr.PortNum: rxe0 has no port 0 (its ports are 1 to 1): invalid argument"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := qp.Modify(&tt.attr, tt.mask)
			if err == nil || err.Error() != tt.msg || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("Modify(%+v, %v) = %v; want %q matching EINVAL", tt.attr, tt.mask, err, tt.msg)
			}
		})
	}
	// Fields the mask does not select are not checked: the next error
	// comes from the state table, still before the kernel.
	err := qp.Modify(&QPAttr{State: QPStateInit, PortNum: 1000, AHAttr: AHAttr{PortNum: -5}}, QPAttrState)
	if err == nil || !errors.Is(err, syscall.EINVAL) || strings.Contains(err.Error(), "PortNum") {
		t.Errorf("Modify(RESET->INIT without the required attributes, unselected bad ports) = %v; want the state table's EINVAL", err)
	}

	pd := &PD{resource: resource{ctx: c, kind: "PD", handle: 1}}
	for _, port := range []int{0, -1, 2, 256} {
		ah, err := pd.CreateAH(AHAttr{PortNum: port})
		want := "uverbs CreateAH: PortNum: rxe0 has no port " + strconv.Itoa(port) + " (its ports are 1 to 1): invalid argument"
		if ah != nil || err == nil || err.Error() != want || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("CreateAH(port %d) = %v, %v; want %q matching EINVAL", port, ah, err, want)
		}
	}
}
