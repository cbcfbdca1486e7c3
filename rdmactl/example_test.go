package rdmactl_test

import (
	"fmt"
	"log"

	"github.com/purerdma/rdma/rdmactl"
)

// Example counts the RDMA objects of each device and lists the QPs, as
// "rdma resource show" and "rdma resource show qp" do.
func Example() {
	c, err := rdmactl.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sums, err := c.Resources("")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range sums {
		qps, _ := s.Count("qp")
		mrs, _ := s.Count("mr")
		fmt.Printf("%s: %d QPs, %d MRs\n", s.Device, qps, mrs)
	}
	qps, err := c.QPs("")
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range qps {
		fmt.Printf("%s QP %d %s %s (%s)\n", q.Device, q.QPNum, q.Type, q.State, q.Owner.Comm)
	}
}

// ExampleClient_Counters reads a port's hardware counters, as "rdma
// statistic show link rxe0/1" does.
func ExampleClient_Counters() {
	c, err := rdmactl.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pc, err := c.Counters("rxe0", 1)
	if err != nil {
		log.Fatal(err)
	}
	sent, _ := pc.Get("sent_pkts")
	fmt.Printf("%s/%d sent %d packets\n", pc.Device, pc.Port, sent)
}

// ExampleClient_CMIDs finds the rdma_cm listeners, as "rdma resource
// show cm_id" shows them.
func ExampleClient_CMIDs() {
	c, err := rdmactl.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ids, err := c.CMIDs("")
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range ids {
		if id.State == rdmactl.CMListen && id.Src.Valid {
			fmt.Printf("pid %d listens on %v\n", id.Owner.PID, id.Src.Value)
		}
	}
}
