package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/proxy"
)

// explainOptions are the flags of pgowl explain.
type explainOptions struct {
	dsn        string
	searchPath string
	paramTypes string
	readonly   []string
	writes     []string
	maxDepth   int
	asJSON     bool
	timeout    time.Duration
	// maxCost, with dsn, asks the database for the plan and judges it as a guard with this max_cost would.
	maxCost float64
	guard   string
}

func newExplainCommand() *cobra.Command {
	var opts explainOptions
	cmd := &cobra.Command{
		Use:   "explain [--dsn URL] \"SQL\"",
		Short: "Show where pgowl would route a statement, and why",
		Long: "Classify SQL as pgowl would and print the decision: the node it needs (primary or a standby),\n" +
			"the reason code, the subject, the chain of functions and views that led to it (for example\n" +
			"f_report() → audit_log(text) writes: INSERT INTO audit) and every warning.\n\n" +
			"With --dsn the function catalogue of that database is loaded first (functions, views,\n" +
			"comments with pgowl:readonly / pgowl:writes), and names resolve with the login's search_path\n" +
			"unless --search-path says otherwise. Without --dsn the analysis is catalogue-free: functions\n" +
			"that are not PostgreSQL built-ins are UNKNOWN_EFFECT and relations are tables.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), cmd.OutOrStdout(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.dsn, "dsn", "", "connection URL or key=value string of the database whose catalogue to use")
	cmd.Flags().StringVar(&opts.searchPath, "search-path", "", "the session's search_path, as in SET search_path (default: the login's)")
	cmd.Flags().StringVar(&opts.paramTypes, "param-types", "", "comma-separated parameter type OIDs, as a Parse message declares them")
	cmd.Flags().StringSliceVar(&opts.readonly, "readonly", nil, "functions asserted read-only, as classify.functions.readonly: schema.name(argtypes)")
	cmd.Flags().StringSliceVar(&opts.writes, "writes", nil, "functions asserted writing, as classify.functions.writes")
	cmd.Flags().IntVar(&opts.maxDepth, "max-depth", classify.DefaultMaxDepth, "deepest function and view nesting analysed (classify.max_depth)")
	cmd.Flags().BoolVar(&opts.asJSON, "json", false, "print the effects as JSON")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", 30*time.Second, "time limit for connecting and loading the catalogue")
	cmd.Flags().Float64Var(&opts.maxCost, "max-cost", 0, "with --dsn: EXPLAIN the statement there and show the verdict of a guard with this max_cost, with the plan nodes")
	cmd.Flags().StringVar(&opts.guard, "guard", "explain", "the guard's name in the verdict (with --max-cost)")
	return cmd
}

func runExplain(ctx context.Context, out io.Writer, sql string, opts explainOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	classifyCtx := &classify.Context{}
	if opts.searchPath != "" {
		classifyCtx.SearchPath = classify.SplitSearchPath(opts.searchPath)
	}
	for _, field := range strings.FieldsFunc(opts.paramTypes, func(r rune) bool { return r == ',' || r == ' ' }) {
		oid, err := strconv.ParseUint(field, 10, 32)
		if err != nil {
			return &exitCode{code: 2, err: fmt.Errorf("--param-types: %q is not a type OID", field)}
		}
		classifyCtx.ParamTypes = append(classifyCtx.ParamTypes, uint32(oid))
	}
	var cat *classify.Catalogue
	var verdict []string
	source := "none (catalogue-free analysis: user functions are unknown, relations are tables)"
	if opts.dsn != "" {
		loadCtx, cancel := context.WithTimeout(ctx, opts.timeout)
		defer cancel()
		conn, err := pgx.Connect(loadCtx, opts.dsn)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer conn.Close(context.Background())
		var database, user, path string
		if err := conn.QueryRow(loadCtx, "SELECT current_database(), current_user, current_setting('search_path')").Scan(&database, &user, &path); err != nil {
			return fmt.Errorf("read the session: %w", err)
		}
		cat, err = catalog.Load(loadCtx, conn, database, catalog.Overrides{Readonly: opts.readonly, Writes: opts.writes})
		if err != nil {
			return err
		}
		classifyCtx.Database, classifyCtx.User = database, user
		if classifyCtx.SearchPath == nil {
			classifyCtx.SearchPath = classify.SplitSearchPath(path)
		}
		source = fmt.Sprintf("database %s: %d functions, loaded %s", database, cat.FunctionCount(), cat.LoadedAt().Format(time.RFC3339))
		if opts.maxCost > 0 {
			verdict = guardVerdict(loadCtx, conn, sql, opts)
		}
	}
	classifier := classify.New(classify.Options{CacheSize: -1, MaxDepth: opts.maxDepth})
	effects := classifier.ClassifyWith(sql, classifyCtx, cat)
	if cat != nil {
		for _, warning := range cat.Warnings() {
			effects.Warnings = append(effects.Warnings, "catalogue: "+warning)
		}
	}
	if opts.asJSON {
		encoder := json.NewEncoder(out)
		encoder.SetIndent("", "  ")
		encoder.SetEscapeHTML(false)
		return encoder.Encode(effects)
	}
	writeExplanation(out, effects, classifyCtx, source)
	for i, l := range verdict {
		label := "guard:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(out, "%-11s %s\n", label, l)
	}
	return nil
}

// guardVerdict asks conn's database for the plan of sql and returns, line by line, the verdict
// of a guard with max_cost opts.maxCost: what a client would get from pgowl, and the plan nodes.
func guardVerdict(ctx context.Context, conn *pgx.Conn, sql string, opts explainOptions) []string {
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON, VERBOSE) "+sql, pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
		return []string{"not checked: the database could not explain it: " + err.Error()}
	}
	exceeded, message, detail, err := proxy.GuardVerdict(plan, opts.guard, conn.Config().Host, opts.maxCost)
	if err != nil {
		return []string{"not checked: " + err.Error()}
	}
	first := "verdict=ok: runs (estimated cost within the limit)"
	if exceeded {
		first = "verdict=refused: " + message + " (SQLSTATE 54001)"
	}
	return append([]string{first}, strings.Split(detail, "\n")...)
}

// writeExplanation prints the effects for people.
func writeExplanation(out io.Writer, e classify.Effects, ctx *classify.Context, source string) {
	node := "the primary"
	if e.Access == classify.Read {
		node = "a standby (within routing.max_replica_lag; the primary if none qualifies and routing.when_no_standby is primary)"
	}
	line := func(label, value string) { fmt.Fprintf(out, "%-11s %s\n", label+":", value) }
	line("runs on", node)
	line("effect", e.Access.String())
	line("reason", e.Reason.String())
	line("subject", e.Subject)
	if chain := e.ChainString(); chain != "" {
		line("chain", chain)
	}
	if e.Tx != classify.TxNone {
		line("tx", e.Tx.String())
	}
	if e.Session != 0 {
		line("session", e.Session.String())
	}
	if e.Pgowl != nil {
		line("pgowl", e.Pgowl.Kind.String()+" pgowl."+e.Pgowl.Name)
	}
	for _, assumption := range e.Assumptions {
		line("declared", assumption)
	}
	if e.CatalogueChange {
		what := "everything: the whole catalogue is read again after it runs"
		if c := e.CatalogueChanges; c != nil && !c.Everything {
			var names []string
			for _, kind := range []struct {
				label string
				names []string
			}{{"functions", c.Functions}, {"relations", c.Relations}, {"types", c.Types}} {
				if len(kind.names) > 0 {
					names = append(names, kind.label+" "+strings.Join(kind.names, ", "))
				}
			}
			what = strings.Join(names, "; ") + ": read again after it runs"
		}
		line("catalogue", "changes "+what)
	}
	for _, warning := range e.Warnings {
		line("warning", warning)
	}
	if e.ParseError != "" {
		line("error", e.ParseError)
	}
	line("statements", strconv.Itoa(e.Statements))
	line("normalized", e.Normalized)
	if ctx.SearchPath != nil {
		line("search_path", strings.Join(ctx.SearchPath, ", "))
	}
	line("functions", source)
}
