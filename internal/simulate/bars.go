package simulate

import (
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strings"
)

// barRow is one bar: its label, its value, the number written at its end and the hover title.
type barRow struct {
	Label, Text, Title string
	Value              float64
}

// barMark is a vertical line across the bars, such as a limit.
type barMark struct {
	Value  float64
	Dashed bool
	Color  color.RGBA
	Title  string
}

// Bar charts are drawn as SVG by hand, not with gonum/plot, for what the report needs of them:
// a hover title on every bar and line, and text whose width is known, so that it never
// overflows the chart. Sizes are in SVG user units (the chart scales to its column).
const (
	barsWidth      = 640.0
	barsLabelWidth = 150.0 // the key names, in monospace
	barsRowHeight  = 20.0
	barsTop        = 8.0
	barsAxisHeight = 34.0
	// charWidth is the width of one character of the charts' monospace text (11 units, 0.6 em)
	// with a margin.
	charWidth   = 7.0
	maxLabelLen = 20
)

// barsChart draws rows as horizontal bars of one colour, with the marks, and the axis labelled
// axis. The scale reaches the largest value and every mark up to four times it; a mark beyond
// that is left off (its legend says so).
func barsChart(rows []barRow, fill color.RGBA, marks []barMark, axis string) (template.HTML, []bool) {
	top := 0.0
	for _, r := range rows {
		top = max(top, r.Value)
	}
	top = max(top, 1)
	shown := make([]bool, len(marks))
	scale := top
	for i, m := range marks {
		if m.Value > 0 && m.Value <= 4*top {
			shown[i] = true
			scale = max(scale, m.Value)
		}
	}
	step := max(niceStep(scale, 5), 1) // counts: whole ticks
	scale = math.Ceil(scale*1.05/step) * step
	// Room for the widest number after the longest bar.
	numberWidth := 0.0
	for _, r := range rows {
		numberWidth = max(numberWidth, float64(len(r.Text))*charWidth)
	}
	x0, x1 := barsLabelWidth+8, barsWidth-numberWidth-8
	x := func(v float64) float64 { return x0 + (x1-x0)*v/scale }
	height := barsTop + float64(len(rows))*barsRowHeight + barsAxisHeight
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bars" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" font-family="monospace" font-size="11">`,
		barsWidth, height, barsWidth, height)
	for i, r := range rows {
		y := barsTop + float64(i)*barsRowHeight
		label := r.Label
		if runes := []rune(label); len(runes) > maxLabelLen {
			label = string(runes[:maxLabelLen-1]) + "…" // the title has it whole
		}
		fmt.Fprintf(&b, `<g><title>%s</title><text x="%g" y="%g" text-anchor="end">%s</text>`,
			template.HTMLEscapeString(r.Title), barsLabelWidth, y+13, template.HTMLEscapeString(label))
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="14" fill="%s"/>`, x0, y+3, x(r.Value)-x0, hexColor(fill))
		fmt.Fprintf(&b, `<text x="%g" y="%g">%s</text></g>`, x(r.Value)+4, y+13, template.HTMLEscapeString(r.Text))
	}
	axisY := barsTop + float64(len(rows))*barsRowHeight + 2
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/>`, x0, axisY, x1, axisY)
	for v := 0.0; v <= scale+step*1e-9; v += step {
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/><text x="%g" y="%g" text-anchor="middle">%s</text>`,
			x(v), axisY, x(v), axisY+4, x(v), axisY+15, formatCount(v))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" font-family="sans-serif">%s</text>`,
		(x0+x1)/2, axisY+29, template.HTMLEscapeString(axis))
	for i, m := range marks {
		if !shown[i] {
			continue
		}
		dash := ""
		if m.Dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(&b, `<g><title>%s</title><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"%s/></g>`,
			template.HTMLEscapeString(m.Title), x(m.Value), barsTop, x(m.Value), axisY, hexColor(m.Color), dash)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()), shown
}

// lineSample is a short line in a mark's style, for a legend written in HTML.
func lineSample(c color.RGBA, dashed bool) template.HTML {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="5 3"`
	}
	return template.HTML(fmt.Sprintf(`<svg class="sample" xmlns="http://www.w3.org/2000/svg" width="28" height="10" viewBox="0 0 28 10"><line x1="0" y1="5" x2="28" y2="5" stroke="%s" stroke-width="2"%s/></svg>`,
		hexColor(c), dash))
}

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
