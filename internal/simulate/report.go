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
	colorMissingKey    = color.RGBA{R: 0xe7, G: 0x29, B: 0x8a, A: 0xff}
	colorPeak          = color.RGBA{R: 0x37, G: 0x7e, B: 0xb8, A: 0xff}
	// limitColors tell a rule's limits apart on the peak chart: limit i has colour i mod 4.
	limitColors = []color.RGBA{{R: 0x22, G: 0x22, B: 0x22, A: 0xff}, {R: 0xa6, G: 0x1a, B: 0x8b, A: 0xff},
		{R: 0x8c, G: 0x51, B: 0x0a, A: 0xff}, {R: 0x01, G: 0x66, B: 0x5e, A: 0xff}}
)

// maxPoints bounds the points of a time-series chart: buckets are merged (and averaged per
// second) beyond it.
const maxPoints = 600

// chart sizes
const (
	chartWidth   = 6.4 * vg.Inch
	seriesHeight = 2.6 * vg.Inch
)

// WriteReport writes the self-contained HTML report of a summary: what the second configuration
// changes and the warnings first, then for each configuration its responses and, per rule, its
// limits in words, the decisions per second over the log's time, the keys limited most and the
// keys' peak rates against the rule's limits; two configurations side by side; and what the log
// cannot tell.
func WriteReport(w io.Writer, s *Summary) error {
	results := []*Result{s.Result}
	if s.Compare != nil {
		results = append(results, s.Compare)
	}
	// One y scale per rule, shared by the configurations, so that columns compare by eye and a
	// quiet rule is not flattened by a busy one.
	scales := map[string]float64{}
	for _, r := range results {
		for name, rr := range r.Rules {
			for _, p := range perSecond(rr.Series, r.SeriesStep, s.Log) {
				scales[name] = max(scales[name], p.Admitted, p.Limited, p.ShadowLimited, p.MissingKey)
			}
		}
	}
	page := reportPage{Summary: s, CannotTell: cannotTell(s, results)}
	for _, r := range results {
		for _, warning := range r.Warnings {
			page.Warnings = append(page.Warnings, r.Config+": "+warning.Message)
		}
		col := reportColumn{Result: r, Statuses: statusRows(r)}
		for _, name := range r.RuleNames() {
			section, err := ruleSection(name, r.Rules[name], r.SeriesStep, s.Log, scales[name])
			if err != nil {
				return err
			}
			col.Rules = append(col.Rules, section)
		}
		page.Columns = append(page.Columns, col)
	}
	if s.Changes != nil {
		page.Changes = changeRows(s)
	}
	if s.Suggestion != nil {
		page.Suggested = suggestionRows(s)
	}
	return reportTemplate.Execute(w, page)
}

type reportPage struct {
	Summary    *Summary
	Warnings   []string
	Changes    []changeRow
	Suggested  []suggestionRow
	Columns    []reportColumn
	CannotTell []string
}

type reportColumn struct {
	Result   *Result
	Statuses []statusRow
	Rules    []reportRule
}

type reportRule struct {
	Name           string
	Rule           *RuleResult
	Limits         []limitLegend
	Series         template.HTML
	TopKeys        template.HTML
	TopKeysTitle   string
	Peaks          template.HTML
	PeakTitle      string
	PeakBeyondNote bool
}

// limitLegend is one limit in words, with the line styles the peak chart draws it in.
type limitLegend struct {
	Name, Text            string
	Burst, Sustained      template.HTML // line samples
	BurstValue, RateValue string
	BurstTitle, RateTitle string
	HasBurstLine, HasRate bool
	// BurstShown and RateShown are false for a line beyond the chart's scale.
	BurstShown, RateShown  bool
	colour                 color.RGBA
	burstMark, sustainMark int // indices in the chart's marks, -1 for none
}

// ruleSection draws one rule's charts and words.
func ruleSection(name string, rr *RuleResult, step time.Duration, log LogInfo, yMax float64) (reportRule, error) {
	section := reportRule{Name: name, Rule: rr}
	var err error
	if section.Series, err = seriesChart(rr, step, log, yMax); err != nil {
		return section, err
	}
	section.TopKeys, section.TopKeysTitle = topKeysChart(rr)
	section.Peaks, section.PeakTitle, section.Limits = peakChart(rr)
	for _, l := range section.Limits {
		if (l.HasBurstLine && !l.BurstShown) || (l.HasRate && !l.RateShown) {
			section.PeakBeyondNote = true
		}
	}
	return section, nil
}

// rate is a time-series point in requests per second.
type rate struct {
	T                                            float64 // Unix seconds at the start of the point
	Admitted, Limited, ShadowLimited, MissingKey float64
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
		// A point is at least a second, the series' resolution: a few requests in the last
		// milliseconds of the log are not a spike.
		seconds := max(covered.Seconds(), min(width.Seconds(), 1))
		r := rate{T: float64(from.UnixNano()) / 1e9}
		for j := i; j < i+group && j < len(series); j++ {
			r.Admitted += float64(series[j].Admitted)
			r.Limited += float64(series[j].Limited)
			r.ShadowLimited += float64(series[j].ShadowLimited)
			r.MissingKey += float64(series[j].MissingKey)
		}
		r.Admitted /= seconds
		r.Limited /= seconds
		r.ShadowLimited /= seconds
		r.MissingKey /= seconds
		out = append(out, r)
	}
	return out
}

// seriesChart draws a rule's decisions per second over the log's time: admitted, limited,
// shadow-limited and without a key, each line only where the rule can have it.
func seriesChart(rr *RuleResult, step time.Duration, log LogInfo, yMax float64) (template.HTML, error) {
	rates := perSecond(rr.Series, step, log)
	p := plot.New()
	// No y label: rotated text leaves the chart in browsers; the heading above says the unit.
	p.Y.Min, p.Y.Max = 0, math.Max(yMax*1.35, 1) // room for the legend above the lines
	p.Y.Tick.Marker = plot.TickerFunc(countTicks)
	p.X.Tick.Marker = plot.TickerFunc(timeTicks)
	p.Legend.Top = true
	series := []struct {
		label  string
		c      color.Color
		value  func(rate) float64
		dashed bool
		show   bool
	}{
		{"admitted", ColorAdmitted, func(r rate) float64 { return r.Admitted }, false, true},
		{"limited", ColorLimited, func(r rate) float64 { return r.Limited }, false, !rr.Shadow || rr.Limited > 0},
		{"shadow-limited", colorShadowLimited, func(r rate) float64 { return r.ShadowLimited }, true, rr.Shadow || rr.ShadowLimited > 0},
		{"no key", colorMissingKey, func(r rate) float64 { return r.MissingKey }, false, rr.MissingKey > 0},
	}
	for _, s := range series {
		if !s.show {
			continue
		}
		xys := make(plotter.XYs, len(rates))
		for i, r := range rates {
			xys[i] = plotter.XY{X: r.T, Y: s.value(r)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return "", err
		}
		line.Color, line.Width = s.c, vg.Points(1.5)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(line)
		p.Legend.Add(s.label, line)
	}
	p.X.Label.Text = "time (UTC)"
	if len(rates) > 1 && rates[1].T-rates[0].T > 1 {
		p.X.Label.Text += ", averaged over " + (time.Duration(math.Round(rates[1].T-rates[0].T)) * time.Second).String()
	}
	return svg(p, chartWidth, seriesHeight)
}

// topKeysChart draws the keys limited (or, for a shadow rule, shadow-limited) most; "" when
// none was.
func topKeysChart(rr *RuleResult) (template.HTML, string) {
	if len(rr.TopLimitedKeys) == 0 {
		return "", ""
	}
	verb, title := "limited", "keys limited most"
	if rr.Shadow {
		verb, title = "shadow-limited", "keys the shadow rule would have limited most"
	}
	rows := make([]barRow, len(rr.TopLimitedKeys))
	for i, k := range rr.TopLimitedKeys {
		n := k.Limited + k.ShadowLimited
		rows[i] = barRow{Label: k.Key, Value: float64(n),
			Text:  fmt.Sprintf("%s of %s", Thousands(n), Thousands(k.Requests)),
			Title: fmt.Sprintf("%s: %s of its %s requests %s (%s)", k.Key, Thousands(n), Thousands(k.Requests), verb, percent(n, k.Requests))}
	}
	chart, _ := barsChart(rows, ColorLimited, nil, verb+" requests (of the key's requests)")
	return chart, title
}

// peakChart draws the keys' peaks in one second, in the units the rule's limits count (the
// requests' cost included), against every limit: its burst dashed, its sustained rate solid,
// each limit in its own colour. It shows the keys limited most, or the busiest when none was.
func peakChart(rr *RuleResult) (template.HTML, string, []limitLegend) {
	keys, title := rr.TopLimitedKeys, "peak units per second of the keys limited most"
	if len(keys) == 0 {
		keys, title = rr.BusiestKeys, "peak units per second of the busiest keys"
	}
	if rr.unit == "requests" {
		title = strings.Replace(title, "units", "requests", 1)
	}
	var marks []barMark
	legends := make([]limitLegend, len(rr.Limits))
	for i, l := range rr.Limits {
		g := limitLegend{Name: limitName(l), Text: l.Text, colour: limitColors[i%len(limitColors)], burstMark: -1, sustainMark: -1}
		if l.Algorithm != "concurrency" {
			g.HasBurstLine, g.BurstValue = true, Thousands(l.Capacity)
			g.BurstTitle = fmt.Sprintf("%s: %s %s at once", g.Name, Thousands(l.Capacity), rr.unit)
			g.burstMark = len(marks)
			marks = append(marks, barMark{Value: float64(l.Capacity), Dashed: true, Color: g.colour, Title: g.BurstTitle})
		}
		if l.PerSecond > 0 {
			g.HasRate, g.RateValue = true, trimFloat(l.PerSecond)
			g.RateTitle = fmt.Sprintf("%s: %s %s per second, sustained", g.Name, trimFloat(l.PerSecond), rr.unit)
			g.sustainMark = len(marks)
			marks = append(marks, barMark{Value: l.PerSecond, Color: g.colour, Title: g.RateTitle})
		}
		g.Burst, g.Sustained = lineSample(g.colour, true), lineSample(g.colour, false)
		legends[i] = g
	}
	if len(keys) == 0 {
		return "", "", legends
	}
	rows := make([]barRow, len(keys))
	for i, k := range keys {
		rows[i] = barRow{Label: k.Key, Value: float64(k.PeakUnitsPerSecond), Text: Thousands(k.PeakUnitsPerSecond),
			Title: fmt.Sprintf("%s: at most %s %s (%s requests) in one second", k.Key, Thousands(k.PeakUnitsPerSecond), rr.unit, Thousands(k.PeakPerSecond))}
	}
	chart, shown := barsChart(rows, colorPeak, marks, "most "+rr.unit+" in one calendar second")
	for i := range legends {
		g := &legends[i]
		g.BurstShown = g.burstMark >= 0 && shown[g.burstMark]
		g.RateShown = g.sustainMark >= 0 && shown[g.sustainMark]
	}
	return chart, title, legends
}

// limitName names a limit as people count: "limit 1", "tier pro, limit 2".
func limitName(l LimitInfo) string {
	if l.Tier != "" {
		return fmt.Sprintf("tier %s, limit %d", l.Tier, l.position+1)
	}
	return fmt.Sprintf("limit %d", l.position+1)
}

func percent(n, of int64) string {
	if of == 0 {
		return "0 %"
	}
	p := 100 * float64(n) / float64(of)
	if p > 0 && p < 1 {
		return "< 1\u00a0%"
	}
	return fmt.Sprintf("%.0f\u00a0%%", p) // a non-breaking space: "13 %" never wraps
}

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
