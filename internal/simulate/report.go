package simulate

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The report's colours; the browser test looks for the first two in the rendered page.
var (
	ColorAdmitted      = color.RGBA{R: 0x1b, G: 0x9e, B: 0x77, A: 0xff}
	ColorLimited       = color.RGBA{R: 0xd9, G: 0x5f, B: 0x02, A: 0xff}
	colorShadowLimited = color.RGBA{R: 0x75, G: 0x70, B: 0xb3, A: 0xff}
	colorPeak          = color.RGBA{R: 0x37, G: 0x7e, B: 0xb8, A: 0xff}
	colorLimitLine     = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
)

// maxPoints bounds the points of a time-series chart: buckets are merged (and averaged per
// second) beyond it.
const maxPoints = 600

// chart sizes
const (
	chartWidth   = 6.4 * vg.Inch
	seriesHeight = 2.6 * vg.Inch
)

// WriteReport writes the self-contained HTML report of a summary: for each configuration, per
// rule, the decisions per second over the log's time, the keys limited most and the peak rate of
// the keys against the rule's limits; two configurations side by side.
func WriteReport(w io.Writer, s *Summary) error {
	results := []*Result{s.Result}
	if s.Compare != nil {
		results = append(results, s.Compare)
	}
	// One y scale for the time series of every configuration, so columns compare by eye.
	var yMax float64
	for _, r := range results {
		for _, rr := range r.Rules {
			for _, p := range perSecond(rr.Series, r.SeriesStep, s.Log) {
				yMax = max(yMax, p.Admitted, p.Limited, p.ShadowLimited)
			}
		}
	}
	page := reportPage{Summary: s}
	for _, r := range results {
		col := reportColumn{Result: r}
		for _, name := range r.RuleNames() {
			rr := r.Rules[name]
			section := reportRule{Name: name, Rule: rr}
			var err error
			if section.Series, err = seriesChart(name, rr, r.SeriesStep, s.Log, yMax); err != nil {
				return err
			}
			if section.TopKeys, err = topKeysChart(rr); err != nil {
				return err
			}
			if section.Peaks, section.PeakTitle, err = peakChart(rr); err != nil {
				return err
			}
			col.Rules = append(col.Rules, section)
		}
		page.Columns = append(page.Columns, col)
	}
	return reportTemplate.Execute(w, page)
}

type reportPage struct {
	Summary *Summary
	Columns []reportColumn
}

type reportColumn struct {
	Result *Result
	Rules  []reportRule
}

type reportRule struct {
	Name      string
	Rule      *RuleResult
	Series    template.HTML
	TopKeys   template.HTML
	Peaks     template.HTML
	PeakTitle string
}

// rate is a time-series point in requests per second.
type rate struct {
	T                                float64 // Unix seconds at the start of the point
	Admitted, Limited, ShadowLimited float64
}

// perSecond turns a rule's buckets into at most maxPoints rates, covering the whole log (a rule
// may have no decisions at the end). A point's rate is over the part of it the log covers, so
// that the partial seconds at either end do not dip.
func perSecond(series []Point, step time.Duration, log LogInfo) []rate {
	start := log.First.Truncate(time.Second)
	n := int(log.Last.Sub(start)/step) + 1
	group := (n + maxPoints - 1) / maxPoints
	width := time.Duration(group) * step
	out := make([]rate, 0, (n+group-1)/group)
	for i := 0; i < n; i += group {
		from := start.Add(time.Duration(i) * step)
		covered := width
		if from.Before(log.First) {
			covered -= log.First.Sub(from)
		}
		if end := log.Last.Add(time.Millisecond); from.Add(width).After(end) {
			covered -= from.Add(width).Sub(end)
		}
		seconds := max(covered.Seconds(), 1e-3)
		r := rate{T: float64(from.UnixNano()) / 1e9}
		for j := i; j < i+group && j < len(series); j++ {
			r.Admitted += float64(series[j].Admitted)
			r.Limited += float64(series[j].Limited)
			r.ShadowLimited += float64(series[j].ShadowLimited)
		}
		r.Admitted /= seconds
		r.Limited /= seconds
		r.ShadowLimited /= seconds
		out = append(out, r)
	}
	return out
}

func seriesChart(name string, rr *RuleResult, step time.Duration, log LogInfo, yMax float64) (template.HTML, error) {
	rates := perSecond(rr.Series, step, log)
	p := plot.New()
	p.Title.Text = "rule " + name + ": decisions per second"
	p.Y.Label.Text = "requests / s"
	p.Y.Min, p.Y.Max = 0, math.Max(yMax*1.3, 1) // room for the legend above the lines
	format := "15:04:05"
	if log.Last.Sub(log.First) > 24*time.Hour {
		format = "Jan 2 15:04"
	}
	p.X.Tick.Marker = plot.TimeTicks{Format: format}
	p.Legend.Top = true
	add := func(label string, c color.Color, value func(rate) float64, dashed bool) error {
		xys := make(plotter.XYs, len(rates))
		for i, r := range rates {
			xys[i] = plotter.XY{X: r.T, Y: value(r)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color, line.Width = c, vg.Points(1.5)
		if dashed {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(line)
		p.Legend.Add(label, line)
		return nil
	}
	if err := add("admitted", ColorAdmitted, func(r rate) float64 { return r.Admitted }, false); err != nil {
		return "", err
	}
	if rr.Shadow || rr.ShadowLimited > 0 {
		if err := add("shadow-limited", colorShadowLimited, func(r rate) float64 { return r.ShadowLimited }, true); err != nil {
			return "", err
		}
	}
	if !rr.Shadow || rr.Limited > 0 {
		if err := add("limited", ColorLimited, func(r rate) float64 { return r.Limited }, false); err != nil {
			return "", err
		}
	}
	if len(rates) > 1 && step*time.Duration((len(rr.Series)+maxPoints-1)/maxPoints) > time.Second {
		p.X.Label.Text = fmt.Sprintf("time (UTC), averaged over %s", (time.Duration(math.Round(rates[1].T-rates[0].T)) * time.Second))
	} else {
		p.X.Label.Text = "time (UTC)"
	}
	return svg(p, chartWidth, seriesHeight)
}

// topKeysChart draws the keys limited most as horizontal bars; "" when none was limited.
func topKeysChart(rr *RuleResult) (template.HTML, error) {
	keys := rr.TopLimitedKeys
	if len(keys) == 0 {
		return "", nil
	}
	values := make(plotter.Values, len(keys))
	names := make([]string, len(keys))
	for i, k := range keys {
		// The first key at the top.
		j := len(keys) - 1 - i
		values[j] = float64(k.Limited + k.ShadowLimited)
		names[j] = k.Key
	}
	p := plot.New()
	p.Title.Text = "keys limited most"
	p.X.Label.Text = "limited requests"
	p.X.Min = 0
	bars, err := plotter.NewBarChart(values, vg.Points(12))
	if err != nil {
		return "", err
	}
	bars.Horizontal = true
	bars.Color = ColorLimited
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(names...)
	return svg(p, chartWidth, barsHeight(len(keys)))
}

// peakChart draws the keys' peak rates against the rule's limits: the keys limited most, or the
// busiest keys when none was.
func peakChart(rr *RuleResult) (template.HTML, string, error) {
	keys, title := rr.TopLimitedKeys, "peak rate of the keys limited most"
	if len(keys) == 0 {
		keys, title = rr.BusiestKeys, "peak rate of the busiest keys"
	}
	if len(keys) == 0 {
		return "", "", nil
	}
	values := make(plotter.Values, len(keys))
	names := make([]string, len(keys))
	xMax := 0.0
	for i, k := range keys {
		j := len(keys) - 1 - i
		values[j] = float64(k.PeakPerSecond)
		names[j] = k.Key
		xMax = max(xMax, values[j])
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "requests in one second (peak)"
	p.X.Min = 0
	bars, err := plotter.NewBarChart(values, vg.Points(12))
	if err != nil {
		return "", "", err
	}
	bars.Horizontal = true
	bars.Color = colorPeak
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(names...)
	var marks []string
	for _, l := range rr.Limits {
		for _, mark := range []struct {
			value float64
			dash  bool
			text  string
		}{{l.PerSecond, false, "sustained " + trimFloat(l.PerSecond) + "/s (solid)"}, {float64(l.Capacity), true, "burst " + trimFloat(float64(l.Capacity)) + " (dashed)"}} {
			if mark.value <= 0 {
				continue
			}
			xMax = max(xMax, mark.value)
			line, err := plotter.NewLine(plotter.XYs{{X: mark.value, Y: -0.5}, {X: mark.value, Y: float64(len(keys)) - 0.5}})
			if err != nil {
				return "", "", err
			}
			line.Color, line.Width = colorLimitLine, vg.Points(1.2)
			if mark.dash {
				line.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
			}
			p.Add(line)
			name := fmt.Sprintf("limit %d", l.position)
			if l.Tier != "" {
				name = fmt.Sprintf("tier %s limit %d", l.Tier, l.position)
			}
			marks = append(marks, name+" "+mark.text)
		}
	}
	if len(marks) > 0 {
		p.X.Label.Text += "\n" + strings.Join(marks, ", ")
	}
	p.X.Max = xMax * 1.1
	chart, err := svg(p, chartWidth, barsHeight(len(keys))+0.4*vg.Inch)
	return chart, title, err
}

func barsHeight(n int) vg.Length { return vg.Length(n)*vg.Points(18) + 1.1*vg.Inch }

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.3f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// svg draws p as an inline SVG element (the XML prolog dropped).
func svg(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	out := b.String()
	if i := strings.Index(out, "<svg"); i >= 0 {
		out = out[i:]
	}
	return template.HTML(out), nil
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"num":   Thousands,
	"int64": func(n int) int64 { return int64(n) },
	"time": func(t time.Time) string {
		return t.Format("2006-01-02 15:04:05.000 MST")
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Tollgate simulation: {{.Summary.Log.File}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.meta { color: #555; margin: 0.2em 0; }
.columns { display: grid; grid-template-columns: repeat({{len .Columns}}, minmax(0, 1fr)); gap: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.15em 0.6em; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; }
svg { max-width: 100%; height: auto; display: block; margin-bottom: 1.2em; }
td:first-child { white-space: nowrap; }
.none { color: #777; font-style: italic; }
</style>
</head>
<body>
<h1>Tollgate simulation</h1>
<p class="meta">{{.Summary.Log.File}} ({{.Summary.Log.Format}}): {{num (int64 .Summary.Log.Lines)}} lines, {{num (int64 .Summary.Log.BadLines)}} bad, from {{time .Summary.Log.First}} to {{time .Summary.Log.Last}}. Keys are {{if eq .Summary.Keys "shown"}}shown as they are{{else}}named by a keyed hash{{end}}.</p>
<div class="columns">
{{range .Columns}}<div>
<h2>{{.Result.Config}}</h2>
<p class="meta">{{num .Result.Requests}} requests, {{num .Result.Exempt}} exempt{{if .Result.InternalErrors}}, {{num .Result.InternalErrors}} internal errors{{end}}.</p>
<table>
<tr><th>rule</th><th>admitted</th><th>limited</th><th>shadow-limited</th><th>missing key</th><th>exempt</th><th>keys</th></tr>
{{range .Rules}}<tr><td>{{.Name}}</td><td>{{num .Rule.Admitted}}</td><td>{{num .Rule.Limited}}</td><td>{{num .Rule.ShadowLimited}}</td><td>{{num .Rule.MissingKey}}</td><td>{{num .Rule.Exempt}}</td><td>{{num (int64 .Rule.Keys)}}</td></tr>
{{end}}</table>
{{range .Rules}}<h3>rule {{.Name}}{{if .Rule.Shadow}} (shadow){{end}}</h3>
{{.Series}}
{{if .TopKeys}}{{.TopKeys}}{{else}}<p class="none">No key was limited.</p>{{end}}
{{if .Peaks}}{{.Peaks}}{{end}}
{{end}}</div>
{{end}}</div>
{{.Summary.FleetHTML}}
</body>
</html>
`))
