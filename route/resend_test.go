package route_test

import (
	"testing"

	"github.com/pgowl/pgowl/route"
)

// TestResendAllowsOnlyWhatCannotRunTwice is the table of when a unit whose
// backend failed before its reply reached the client is sent again: every
// rule against every kind of failure, sent or not.
func TestResendAllowsOnlyWhatCannotRunTwice(t *testing.T) {
	type row struct{ never, ifNotRun, prepareOnly, read bool }
	cases := []struct {
		failure route.Failure
		want    row
	}{
		{route.Failure{Kind: route.FailureOther}, row{false, true, true, true}},
		{route.Failure{Kind: route.FailureOther, Sent: true}, row{false, false, true, true}},
		{route.Failure{Kind: route.FailureTerminated}, row{false, true, true, true}},
		{route.Failure{Kind: route.FailureTerminated, Sent: true}, row{false, true, true, true}},
		// A node gone silent is never sent to again, sent or not.
		{route.Failure{Kind: route.FailureSilent}, row{false, false, false, false}},
		{route.Failure{Kind: route.FailureSilent, Sent: true}, row{false, false, false, false}},
		{route.Failure{Kind: route.FailureUnresponsive}, row{false, true, true, true}},
		// Taken off after sending: only a read cannot have had an effect.
		{route.Failure{Kind: route.FailureUnresponsive, Sent: true}, row{false, false, false, true}},
		// A reply reached the client: never.
		{route.Failure{Kind: route.FailureOther, Answered: true}, row{false, false, false, false}},
		{route.Failure{Kind: route.FailureTerminated, Answered: true}, row{false, false, false, false}},
	}
	for _, c := range cases {
		got := row{route.ResendNever.Allows(c.failure), route.ResendIfNotRun.Allows(c.failure),
			route.ResendPrepareOnly.Allows(c.failure), route.ResendRead.Allows(c.failure)}
		if got != c.want {
			t.Errorf("%+v (%s): never/if_not_run/prepare_only/read allow %+v, want %+v", c.failure, c.failure.Kind, got, c.want)
		}
	}
}

func TestResendAndFailureNamesRoundTrip(t *testing.T) {
	for _, r := range []route.Resend{route.ResendNever, route.ResendIfNotRun, route.ResendPrepareOnly, route.ResendRead} {
		text, err := r.MarshalText()
		var back route.Resend
		if err != nil || back.UnmarshalText(text) != nil || back != r {
			t.Errorf("%v: %s, %v -> %v", r, text, err, back)
		}
	}
	var k route.FailureKind
	if err := k.UnmarshalText([]byte("vanished")); err == nil {
		t.Errorf("unknown failure kind accepted: %v", k)
	}
}
