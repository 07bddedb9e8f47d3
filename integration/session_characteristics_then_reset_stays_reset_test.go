package integration

import "testing"

// TestSessionCharacteristicsThenResetStaysReset: SET SESSION CHARACTERISTICS
// AS TRANSACTION READ ONLY (recorded with no name), then RESET
// default_transaction_read_only: PostgreSQL gives off; once the session moves,
// the replay must not bring READ ONLY back.
func TestSessionCharacteristicsThenResetStaysReset(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	for _, tc := range []struct{ set, reset, name string }{
		{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "RESET default_transaction_read_only", "default_transaction_read_only"},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ", "RESET default_transaction_isolation", "default_transaction_isolation"},
		{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ", "SET default_transaction_isolation = 'read committed'", "default_transaction_isolation"},
		{"SET XML OPTION CONTENT", "RESET xmloption", "xmloption"},
		{"SET SESSION AUTHORIZATION DEFAULT", "SELECT 1", "session_authorization"},
	} {
		t.Run(tc.reset, func(t *testing.T) {
			ctx := timeoutCtx(t, 2*statementTimeout)
			a := o.connect(t, nil).PgConn()
			b := o.connect(t, nil).PgConn()
			before, after := r6Moved(t, ctx, a, b, "SELECT current_setting('"+tc.name+"')", tc.set, tc.reset)
			if after != before {
				t.Errorf("after %s; %s the session's %s is %q on its own backend but %q once another session used it", tc.set, tc.reset, tc.name, before, after)
			}
		})
	}
}
