package simulate

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// table is the fleet model's figures as headings and rows of cells: a row per rule with a
// global limit and variant (with its lease, without).
func (r *FleetResult) table() (headings []string, rows [][]string) {
	headings = []string{"rule", "limit", "leases"}
	for _, c := range fleetColumns {
		headings = append(headings, c.heading)
	}
	row := func(rule *FleetRule, variant string, f *FleetFigures) {
		cells := []string{rule.Rule, rule.GlobalLimit, variant}
		for _, c := range fleetColumns {
			cells = append(cells, c.value(f))
		}
		rows = append(rows, cells)
	}
	for i := range r.Rules {
		rule := &r.Rules[i]
		if rule.Lease != "" {
			row(rule, rule.Lease, &rule.WithLeases)
		}
		row(rule, "none", &rule.WithoutLeases)
	}
	return headings, rows
}

// fleetColumns are the table's columns: heading and value.
var fleetColumns = []struct {
	heading string
	value   func(f *FleetFigures) string
}{
	{"checked", func(f *FleetFigures) string { return Thousands(f.Checked) }},
	{"admitted", func(f *FleetFigures) string { return Thousands(f.Admitted) }},
	{"calls/request", func(f *FleetFigures) string { return strconv.FormatFloat(f.CallsPerRequest, 'f', 3, 64) }},
	{"calls/s peak", func(f *FleetFigures) string { return Thousands(f.CallsPerSecondPeak) }},
	{"calls/s mean", func(f *FleetFigures) string { return Thousands(int64(f.CallsPerSecondMean + 0.5)) }},
	{"redis cmds/s peak", func(f *FleetFigures) string { return Thousands(f.RedisCommandsPerSecondPeak) }},
	{"busiest shard cmds/s", func(f *FleetFigures) string { return Thousands(f.BusiestShardCommandsPerSecondPeak) }},
	{"hot key calls/s", func(f *FleetFigures) string { return Thousands(f.HotKeyCallsPerSecondPeak) }},
	{"tokens stranded", func(f *FleetFigures) string { return Thousands(f.LeaseTokensStranded) }},
	{"under-admitted", func(f *FleetFigures) string { return Thousands(f.UnderAdmitted) }},
}

// WriteFleetTable writes the fleet model's figures as a text table, a line per rule and variant.
func WriteFleetTable(w io.Writer, r *FleetResult) error {
	fmt.Fprintf(w, "\nfleet model: %d replicas of %d worker VMs, %s balance, service answers after %s, Redis of %d master(s)\n",
		r.Replicas, r.Workers, r.Balance, r.ServiceLatency, r.RedisShards)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	headings, rows := r.table()
	fmt.Fprintln(tw, strings.Join(headings, "\t")+"\t")
	for _, cells := range rows {
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

var fleetTemplate = template.Must(template.New("fleet").Parse(`<h2>Fleet model</h2>
<p class="meta">{{.Result.Replicas}} replicas of {{.Result.Workers}} worker VMs, {{.Result.Balance}} balance, the service answering after {{.Result.ServiceLatency}}, Redis of {{.Result.RedisShards}} master(s): calls to the rate limit service and Redis commands (INCRBY and EXPIRE per descriptor) with the configuration's leases and without.</p>
<table>
<tr>{{range .Headings}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
`))

// FleetHTML is the report's section on the fleet model; empty without one.
func (s *Summary) FleetHTML() (template.HTML, error) {
	if s.Fleet == nil {
		return "", nil
	}
	data := struct {
		Result   *FleetResult
		Headings []string
		Rows     [][]string
	}{Result: s.Fleet}
	data.Headings, data.Rows = s.Fleet.table()
	var b strings.Builder
	if err := fleetTemplate.Execute(&b, data); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil
}
