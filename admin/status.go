package admin

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// chartColors are the colours of a chart's lines, in node (or reason) order.
var chartColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"}

// statusNode is one row of the status page's node table.
type statusNode struct {
	Name, Addr, Role, Verdict string
	Up                        bool
	Timeline                  uint32
	Lag                       string
	InUse, Idle, Waiting      int
	Refused                   bool // the verdict is a refusal (lag exceeded, down)
}

type statusPage struct {
	Version     string
	Now         string
	Ready       Readiness
	MaxLag      string
	Nodes       []statusNode
	LagChart    template.HTML
	NodeChart   template.HTML
	ReasonChart template.HTML
	Refusals    []historyEntry
	Minutes     int
}

var statusTemplate = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="5">
<title>pgowl status</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:8px 12px;max-width:1100px;color:#222}
h1{font-size:1.3em;margin:.3em 0}h2{font-size:1.05em;margin:1.2em 0 .4em}
.ok{color:#17672a}.bad{color:#b00020;font-weight:600}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #ddd;white-space:nowrap}
td.wrap{white-space:normal;min-width:9em;overflow-wrap:anywhere}
svg{width:100%;height:auto;background:#fafafa;border:1px solid #e3e3e3}
.legend span{display:inline-block;margin-right:1em;font-size:.85em}
.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-.1em}
small{color:#666}
</style></head><body>
<h1>pgowl <small>{{.Version}}</small></h1>
<p id="readiness">{{if .Ready.Ready}}<span class="ok">ready</span>: writes to {{.Ready.Primary}}, reads to {{.Ready.Reads}}{{else}}<span class="bad">not ready</span>: {{.Ready.Why}}{{end}} <small>at {{.Now}}</small></p>
<h2>Nodes</h2>
<div class="scroll"><table id="nodes"><tr><th>node</th><th>role</th><th>state</th><th>timeline</th><th>lag</th><th>backends in use / idle</th><th>waiting</th></tr>
{{range .Nodes}}<tr data-node="{{.Name}}"><td>{{.Name}} <small>{{.Addr}}</small></td><td>{{.Role}}</td><td class="wrap{{if .Refused}} bad{{end}}">{{.Verdict}}</td><td>{{.Timeline}}</td><td>{{.Lag}}</td><td>{{.InUse}} / {{.Idle}}</td><td>{{.Waiting}}</td></tr>
{{end}}</table></div>
<h2>Replication lag, last {{.Minutes}} min <small>(dashed: routing.max_replica_lag {{.MaxLag}})</small></h2>
{{.LagChart}}
<h2>Routed units per second, by node</h2>
{{.NodeChart}}
<h2>Routed units per second, by reason</h2>
{{.ReasonChart}}
<h2>Latest refusals</h2>
{{if .Refusals}}<div class="scroll"><table id="refusals"><tr><th>time</th><th>refusal</th><th>effect</th><th>user</th><th>statement</th></tr>
{{range .Refusals}}<tr><td>{{.Time.Format "15:04:05.000"}}</td><td class="bad">{{.Refusal}}</td><td>{{.Reason}}</td><td>{{.User}}</td><td class="wrap">{{.Statement}}</td></tr>
{{end}}</table></div>{{else}}<p id="refusals">none</p>{{end}}
<p><small><a href="/metrics">/metrics</a> · <a href="/history?limit=100">/history</a> · <a href="/readyz">/readyz</a></small></p>
</body></html>
`))

func (r *Recorder) serveStatus(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	snap := r.src.Nodes.Snapshot()
	page := statusPage{
		Version: r.src.Version,
		Now:     now.UTC().Format("2006-01-02 15:04:05 UTC"),
		Ready:   readiness(&r.src, snap, r.policy(), now),
		MaxLag:  r.policy().MaxReplicaLag.String(),
		Minutes: int(seriesPoints * seriesStep / time.Minute),
	}
	var names []string
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		names = append(names, n.Name)
		st := r.src.Pool.NodeStats(n.Name)
		verdict := NodeVerdict(n, r.policy(), now)
		row := statusNode{Name: n.Name, Addr: n.Addr, Role: n.Role.String(), Up: n.Up, Timeline: n.Timeline,
			Verdict: verdict, InUse: st.InUse, Idle: st.Idle, Waiting: st.Waiting, Lag: "unknown",
			Refused: !strings.HasPrefix(verdict, "serves")}
		if lag := effectiveLag(n, now); !math.IsNaN(lag) {
			row.Lag = (time.Duration(lag * float64(time.Second))).Round(time.Millisecond).String()
		}
		page.Nodes = append(page.Nodes, row)
	}
	points := r.series.snapshot()
	page.LagChart = lineChart("lag", points, names, func(p *point, k string) float64 { return p.lag[k] },
		r.policy().MaxReplicaLag.Seconds(), func(v float64) string { return fmt.Sprintf("%.3gs", v) })
	page.NodeChart = lineChart("by-node", points, names, func(p *point, k string) float64 { return p.byNode[k] / seriesStep.Seconds() }, 0,
		func(v float64) string { return fmt.Sprintf("%.4g/s", v) })
	var reasons []string
	for _, p := range points {
		for k, v := range p.byReason {
			if v > 0 && !slices.Contains(reasons, k) {
				reasons = append(reasons, k)
			}
		}
	}
	slices.Sort(reasons)
	page.ReasonChart = lineChart("by-reason", points, reasons, func(p *point, k string) float64 { return p.byReason[k] / seriesStep.Seconds() }, 0,
		func(v float64) string { return fmt.Sprintf("%.4g/s", v) })
	for _, u := range r.latestRefusals() {
		page.Refusals = append(page.Refusals, toHistoryEntry(&u))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTemplate.Execute(w, page); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// lineChart draws one line per key over the points as inline SVG, with a
// legend; limit, when positive, is drawn as a dashed line. A NaN value
// breaks the line.
func lineChart(id string, points []point, keys []string, value func(*point, string) float64, limit float64, label func(float64) string) template.HTML {
	const width, height, left, bottom, top = 600.0, 180.0, 52.0, 18.0, 8.0
	var b strings.Builder
	top_ := max(limit*1.1, 0)
	for i := range points {
		for _, k := range keys {
			if v := value(&points[i], k); !math.IsNaN(v) && v > top_ {
				top_ = v
			}
		}
	}
	if top_ <= 0 {
		top_ = 1
	}
	top_ *= 1.05
	plotW, plotH := width-left-4, height-bottom-top
	x := func(i int) float64 {
		if len(points) < 2 {
			return left
		}
		return left + plotW*float64(i)/float64(len(points)-1)
	}
	y := func(v float64) float64 { return top + plotH*(1-v/top_) }
	fmt.Fprintf(&b, `<svg id="chart-%s" viewBox="0 0 %.0f %.0f" role="img" xmlns="http://www.w3.org/2000/svg">`, id, width, height)
	for _, frac := range []float64{0, 0.5, 1} {
		v := top_ / 1.05 * frac
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" font-size="10" text-anchor="end" fill="#555">%s</text>`,
			left, width-4, y(v), y(v), left-4, y(v)+3, html.EscapeString(label(v)))
	}
	if len(points) > 0 {
		span := points[len(points)-1].at.Sub(points[0].at).Round(time.Second)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555">-%s</text><text x="%.1f" y="%.1f" font-size="10" text-anchor="end" fill="#555">now</text>`,
			left, height-4, span, width-4, height-4)
	}
	if limit > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#b00020" stroke-dasharray="4 3"/>`, left, width-4, y(limit), y(limit))
	}
	for ki, k := range keys {
		var d strings.Builder
		pen := false
		for i := range points {
			v := value(&points[i], k)
			if math.IsNaN(v) {
				pen = false
				continue
			}
			if pen {
				fmt.Fprintf(&d, " L%.1f,%.1f", x(i), y(v))
			} else {
				fmt.Fprintf(&d, " M%.1f,%.1f", x(i), y(v))
				pen = true
			}
		}
		if d.Len() > 0 {
			fmt.Fprintf(&b, `<path data-series="%s" d="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, html.EscapeString(k), d.String(), chartColors[ki%len(chartColors)])
		}
	}
	b.WriteString(`</svg><div class="legend">`)
	for ki, k := range keys {
		last := "–"
		if len(points) > 0 {
			if v := value(&points[len(points)-1], k); !math.IsNaN(v) {
				last = label(v)
			}
		}
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s %s</span>`, chartColors[ki%len(chartColors)], html.EscapeString(k), html.EscapeString(last))
	}
	b.WriteString(`</div>`)
	return template.HTML(b.String())
}
