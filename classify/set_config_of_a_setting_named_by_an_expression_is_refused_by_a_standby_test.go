package classify_test

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestSetConfigOfASettingNamedByAnExpressionIsRefusedByAStandby: set_config('transaction_read_only',
// 'off', ...) is routed to the primary, because a standby refuses read-write mode. When the name is
// not a literal (a column, a concatenation, a parameter of a prepared statement) pgowl treats the
// call as an ordinary set_config, a read, although a name it cannot read may be
// transaction_read_only: current_setting of a name it cannot read already goes to the primary. A
// standby refuses such a statement with "transaction read-write mode must be set before any
// query" (25001); the primary runs it.
func TestSetConfigOfASettingNamedByAnExpressionIsRefusedByAStandby(t *testing.T) {
	ctx, primary, standby := startPrimaryAndStandby(t)

	classifier := classify.New(classify.Options{CacheSize: -1})
	for _, sql := range []string{
		"SELECT set_config(name, 'off', false) FROM (VALUES ('transaction_read_only')) AS s(name)",
		"SELECT set_config('transaction_' || 'read_only', 'off', true)",
		"SELECT set_config(lower('TRANSACTION_READ_ONLY'), 'off', false)",
	} {
		effects := classifier.Classify(sql)
		if effects.Access != classify.Read {
			continue
		}
		standbyErr := runOnNode(ctx, standby, sql)
		primaryErr := runOnNode(ctx, primary, sql)
		if standbyErr != nil {
			primarySays := "runs it"
			if primaryErr != nil {
				primarySays = primaryErr.Error()
			}
			t.Errorf("%s\n  pgowl: read (%v), sent to a standby\n  standby: %v\n  primary: %s",
				sql, effects.Reason, standbyErr, primarySays)
		}
	}
}
