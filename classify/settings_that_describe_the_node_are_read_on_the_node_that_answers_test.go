package classify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestSettingsThatDescribeTheNodeAreReadOnTheNodeThatAnswers: pgowl sends SHOW
// transaction_read_only / in_hot_standby, pg_settings, inet_server_port(), pg_ls_dir() and the other
// readers of "which server is this" to the primary (NODE_LOCAL_STATS), since a standby's answer
// describes the standby. The settings a standby replicates by said the same and were sent to a
// standby: primary_conninfo and primary_slot_name are set only on a standby (a health check reading
// them concludes it reached a replica). The client got the standby's answer where the primary's
// differs, silently. (port, data_directory, config_file and cluster_name differ between the nodes
// of this test's loopback cluster, but are usually the same on every host of a deployment: they
// stay reads, and tests tell the node that answered by them.)
func TestSettingsThatDescribeTheNodeAreReadOnTheNodeThatAnswers(t *testing.T) {
	ctx, primary, standby := startPrimaryAndStandby(t)

	classifier := classify.New(classify.Options{CacheSize: -1})
	// The classifier does send these to the primary: the rule the cases below fall under.
	for _, sql := range []string{"SHOW in_hot_standby", "SELECT inet_server_port()", "SELECT setting FROM pg_settings WHERE name = 'port'"} {
		if e := classifier.Classify(sql); e.Access != classify.Write || e.Reason != classify.ReasonNodeLocalStats {
			t.Fatalf("%s is %v %v, want NODE_LOCAL_STATS", sql, e.Access, e.Reason)
		}
	}
	for _, sql := range []string{
		"SHOW primary_conninfo",
		"SHOW primary_slot_name",
		"SELECT current_setting('primary_slot_name')",
		"SHOW restore_command",
	} {
		effects := classifier.Classify(sql)
		if effects.Access != classify.Read {
			continue
		}
		onStandby, err := sdnValue(ctx, standby, sql)
		if err != nil {
			t.Fatalf("%s on the standby: %v", sql, err)
		}
		onPrimary, err := sdnValue(ctx, primary, sql)
		if err != nil {
			t.Fatalf("%s on the primary: %v", sql, err)
		}
		if onStandby != onPrimary {
			t.Errorf("%s\n  pgowl: read (%v), sent to a standby, which answers %q\n  the primary answers %q",
				sql, effects.Reason, onStandby, onPrimary)
		}
	}
}

func sdnValue(ctx context.Context, node *cluster.Node, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, node.SuperuserDSN())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return "", err
	}
	if len(results) == 0 || len(results[0].Rows) == 0 {
		return "", nil
	}
	return string(results[0].Rows[0][0]), nil
}
