package classify

import "testing"

// TestABlockEndAnywhereInAStringIsSeen: Effects.EndsBlock is set when any statement of a string
// ends its transaction block, not only the first transaction statement, which Transaction
// describes ("SAVEPOINT b; COMMIT; BEGIN" ends the block its savepoint was set in).
func TestABlockEndAnywhereInAStringIsSeen(t *testing.T) {
	c := New(Options{})
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"COMMIT", true},
		{"END", true},
		{"ROLLBACK", true},
		{"COMMIT AND CHAIN", true},
		{"ROLLBACK AND CHAIN", true},
		{"PREPARE TRANSACTION 'x'", true},
		{"SAVEPOINT b; COMMIT; BEGIN", true},
		{"SELECT 1; ROLLBACK", true},
		{"BEGIN; SELECT 1; COMMIT", true},
		{"BEGIN", false},
		{"SAVEPOINT b", false},
		{"ROLLBACK TO b", false},
		{"RELEASE b", false},
		{"SAVEPOINT b; SELECT 1", false},
		{"BEGIN; SELECT 1", false},
		{"SELECT 1", false},
	} {
		if got := c.Classify(tc.sql).EndsBlock; got != tc.want {
			t.Errorf("%s: EndsBlock %v, want %v", tc.sql, got, tc.want)
		}
	}
}
