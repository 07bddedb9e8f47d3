package proxy

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestSettingsLeaveWithTheBatch: which read-only parts of a batch sent at a Flush may leave their
// standby when a later part writes, their settings read back and carried to the primary.
func TestSettingsLeaveWithTheBatch(t *testing.T) {
	c := classify.New(classify.Options{})
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT 1", true},
		{"SET work_mem = '8MB'", true},
		{"SET search_path = app, public", true},
		{"RESET work_mem", true},
		{"SELECT set_config('work_mem', '8MB', false)", true},
		{"SET LOCAL work_mem = '8MB'", false},
		{"SELECT set_config('work_mem', '8MB', true)", false},
		{"SELECT set_config('work_mem', '8MB', true) AS old", false},
		{"SELECT set_config('work_mem', '8MB', false) AS old", false}, // not followed by its text
		{"RESET ALL", false},
		{"SET ROLE app", false},
		{"LISTEN x", false},
		{"SET default_transaction_isolation = 'serializable'", false},
	} {
		eff := c.Classify(tc.sql)
		if got := settingsLeaveWithTheBatch(&eff); got != tc.want {
			t.Errorf("%s: leaves with the batch %v, want %v (session %v, settings %+v, names %q)", tc.sql, got, tc.want, eff.Session, eff.Settings, eff.SetConfigNames)
		}
	}
}
