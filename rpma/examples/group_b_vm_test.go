package examples_test

import (
	"testing"
)

// The ping-pong examples as librpma's run-all-examples.sh runs them:
// seed 7, 3 rounds.

func TestExample08MessagesPingPong(t *testing.T) {
	// C's client loops while (--rounds): 3 rounds are 2 exchanges.
	runExample(t, example{name: "08-messages-ping-pong",
		clientArgs: []string{"7", "3"},
		serverOut:  []string{"Value received: 7\n", "Value sent: 8\n", "Value received: 8\n", "Value sent: 9\n"},
		clientOut:  []string{"Value sent: 7\n", "Value received: 8\n", "Value sent: 8\n", "Value received: 9\n"}})
}

// TestExample08srqSimpleMessagesPingPongWithSRQ: receives from the
// SRQ's receive CQ (no argument), the connection's main CQ (m) and its
// separate receive CQ (r); the client's do-while makes 3 exchanges.
func TestExample08srqSimpleMessagesPingPongWithSRQ(t *testing.T) {
	for _, mode := range []string{"", "m", "r"} {
		t.Run("rcq="+mode, func(t *testing.T) {
			var args []string
			if mode != "" {
				args = []string{mode}
			}
			runExample(t, example{name: "08srq-simple-messages-ping-pong-with-srq",
				serverArgs: args,
				clientArgs: []string{"7", "3"},
				serverOut:  []string{"Value received: 7\n", "Value sent: 8\n", "Value received: 9\n", "Value sent: 10\n"},
				clientOut:  []string{"Value sent: 7\n", "Value received: 8\n", "Value sent: 9\n", "Value received: 10\n"}})
		})
	}
}
