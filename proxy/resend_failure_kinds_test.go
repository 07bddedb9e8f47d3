package proxy

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/pgowl/pgowl/route"
)

// TestSendFailureNamesHowTheBackendFailed checks that each way a backend
// fails under a unit reaches the plan's resend rule as the kind it is.
func TestSendFailureNamesHowTheBackendFailed(t *testing.T) {
	timeout := fmt.Errorf("read: %w", os.ErrDeadlineExceeded)
	cases := []struct {
		name string
		err  error
		want route.FailureKind
	}{
		{"a closed connection", io.EOF, route.FailureOther},
		{"a reset", fmt.Errorf("read: %w", syscall.ECONNRESET), route.FailureOther},
		{"a timeout", timeout, route.FailureSilent},
		{"an unreachable host", fmt.Errorf("read: %w", syscall.EHOSTUNREACH), route.FailureSilent},
		{"an unreachable network", fmt.Errorf("read: %w", syscall.ENETUNREACH), route.FailureSilent},
		{"an administrator's termination", &backendClosing{node: "pg1", code: "57P01"}, route.FailureTerminated},
		{"a shutdown of the database", &backendClosing{node: "pg1", code: "57P05"}, route.FailureTerminated},
		// A crash restart's warning also reaches a backend whose COMMIT waits for a synchronous standby.
		{"a crash restart's warning", &backendClosing{node: "pg1", code: "57P02"}, route.FailureOther},
		// Taken off an unresponsive node: that, even when its cause is a timeout.
		{"an unresponsive node", &nodeUnresponsive{node: "pg1", limit: time.Second, cause: timeout}, route.FailureUnresponsive},
	}
	for _, c := range cases {
		f := sendFailure(c.err, true, false)
		if f.Kind != c.want || !f.Sent || f.Answered {
			t.Errorf("%s: %+v, want kind %s, sent", c.name, f, c.want)
		}
	}
	if f := sendFailure(io.EOF, false, true); f.Sent || !f.Answered {
		t.Errorf("sent and answered not carried: %+v", f)
	}
}
