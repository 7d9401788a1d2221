package simulate

// reportHTML is the report's template (reportPage). It holds no script and fetches nothing.
const reportHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Tollgate simulation: {{.Summary.Log.File}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 100%; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; overflow-wrap: anywhere; }
h3 { font-size: 1em; margin: 1.6em 0 0.3em; }
h4 { font-size: 0.9em; margin: 0.8em 0 0.2em; font-weight: 600; }
.meta { color: #555; margin: 0.2em 0; overflow-wrap: anywhere; }
.columns { display: grid; grid-template-columns: repeat({{len .Columns}}, minmax(0, 1fr)); gap: 2em; }
.columns > div { min-width: 0; }
@media (max-width: 1100px) { .columns { grid-template-columns: minmax(0, 1fr); } }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.8em; }
th, td { padding: 0.15em 0.25em; text-align: right; border-bottom: 1px solid #eee; vertical-align: bottom; }
th { font-weight: 600; }
th:first-child, td:first-child { text-align: left; white-space: nowrap; }
td.text, th.text { text-align: left; }
.key { font-family: monospace; overflow-wrap: anywhere; }
svg { max-width: 100%; height: auto; display: block; margin-bottom: 0.6em; }
svg.sample { display: inline-block; vertical-align: middle; margin: 0 0.2em 0 0; }
.none { color: #777; font-style: italic; }
.box { border: 1px solid #ccc; border-radius: 4px; padding: 0.4em 1em; margin: 1em 0; }
.warnings { border-color: #d95f02; background: #fff6ef; }
.changes { border-color: #377eb8; background: #f3f8fc; }
.suggestion { border-color: #1b9e77; background: #f2faf7; }
.big { font-size: 1.1em; }
ul.limits { margin: 0.2em 0 0.6em; padding-left: 1.2em; font-size: 0.9em; }
.alone { background: #f4f3fa; border-left: 3px solid #7570b3; padding: 0.3em 0.6em; font-size: 0.9em; }
.phases { font-size: 0.9em; }
.legend { font-size: 0.85em; margin: 0 0 1em; }
.legend div { margin: 0.1em 0; }
</style>
</head>
<body>
<h1>Tollgate simulation</h1>
<p class="meta">{{.Summary.Log.File}} ({{.Summary.Log.Format}}): {{num (int64 .Summary.Log.Lines)}} lines, {{num (int64 .Summary.Log.BadLines)}} bad, from {{time .Summary.Log.First}} to {{time .Summary.Log.Last}}. Keys are {{if eq .Summary.Keys "shown"}}shown as they are{{else}}named by a keyed hash{{end}}.</p>
{{with .Summary.Changes}}<div class="box changes"><h2>What {{.To}} changes from {{.From}}</h2>
<p class="big"><b>{{num .NewlyLimited}}</b> requests newly limited, <b>{{num .NewlyAdmitted}}</b> newly admitted, of {{num $.Summary.Requests}}.</p>
<table>
<tr><th>rule</th><th>newly limited</th><th>newly admitted</th><th>keys newly limited</th><th>keys no longer limited</th><th></th></tr>
{{range $.Changes}}<tr><td>{{.Rule}}</td><td>{{num .NewlyLimited}}</td><td>{{num .NewlyAdmitted}}</td><td>{{num (int64 .KeysNewlyLimited)}}</td><td>{{num (int64 .KeysNewlyAdmitted)}}</td><td class="text">{{.In}}</td></tr>
{{end}}</table>
{{range $.Changes}}{{if .MovedMost}}<h4>rule {{.Rule}}: the keys that move most</h4>
<table><tr><th>key</th><th>requests</th><th>limited before</th><th>limited after</th><th>change</th></tr>
{{range .MovedMost}}<tr><td class="key">{{.Key}}</td><td>{{num .Requests}}</td><td>{{num .LimitedFrom}}</td><td>{{num .LimitedTo}}</td><td>{{signed (delta .LimitedTo .LimitedFrom)}}</td></tr>
{{end}}</table>{{end}}{{end}}
</div>{{end}}
{{with .Summary.Suggestion}}<div class="box suggestion"><h2>Suggested limits for {{$.Summary.Config}}</h2>
<p>Per rule, the smallest limits under which at most {{.KeysPercent}}&nbsp;% of its keys would ever be limited, the keys limited most left out, then replayed; suggested.json is that configuration. It cannot know how clients would react (backing off, retrying) or traffic the log does not hold.</p>
<table><tr><th>rule</th><th class="text">limits fitted to the log</th><th>keys left out</th><th>limited or shadow-limited (replayed)</th><th>keys limited</th></tr>
{{range $.Suggested}}<tr><td>{{.Rule}}</td><td class="text">{{range .Limits}}<div>{{.Text}}{{with .Kept}} (kept: {{.}}){{end}}</div>{{end}}</td><td>{{num (int64 .KeysExcluded)}}</td><td>{{num (add .Replayed.Limited .Replayed.ShadowLimited)}}</td><td>{{num (int64 .Replayed.KeysLimited)}} of {{num (int64 .Replayed.Keys)}}</td></tr>
{{end}}</table></div>{{end}}
{{with .Warnings}}<div class="box warnings"><h2>Warnings: the setup is probably wrong</h2><ul>
{{range .}}<li>{{.}}</li>
{{end}}</ul></div>{{end}}
<div class="columns">
{{range .Columns}}<div>
<h2>{{.Result.Config}}</h2>
<p class="meta">{{num .Result.Requests}} requests, {{num .Result.Exempt}} exempt{{if .Result.InternalErrors}}, {{num .Result.InternalErrors}} internal errors{{end}}.</p>
<h4>Responses</h4>
<table><tr><th>status</th><th>requests</th><th>share</th><th class="text">meaning</th></tr>
{{range .Statuses}}<tr><td>{{.Code}}</td><td>{{.Count}}</td><td>{{.Share}}</td><td class="text">{{.Meaning}}</td></tr>
{{end}}</table>
<h4>Rules</h4>
<table>
<tr><th>rule</th><th>requests</th><th>admitted</th><th>limited</th><th>shadow-limited</th><th>no key</th><th>exempt</th><th>keys (limited)</th></tr>
{{range .Rules}}<tr><td>{{.Name}}</td><td>{{num .Rule.Requests}}</td><td>{{num .Rule.Admitted}}</td><td>{{num .Rule.Limited}}</td><td>{{num .Rule.ShadowLimited}}</td><td>{{num .Rule.MissingKey}}</td><td>{{num .Rule.Exempt}}</td><td>{{num (int64 .Rule.Keys)}} ({{num (int64 .Rule.KeysLimited)}})</td></tr>
{{end}}</table>
{{range .Rules}}<h3>rule {{.Name}}{{if .Rule.Shadow}} (shadow){{end}}</h3>
<ul class="limits">{{range .Limits}}<li>{{.Name}}: {{.Text}}</li>{{end}}<li>{{.Rule.Cost}}{{if .Rule.InvalidCost}}; {{num .Rule.InvalidCost}} requests had a cost header that is not a whole number (400){{end}}</li></ul>
{{$r := .Rule}}{{with $r.WindowPhases}}<p class="phases">Windows start where Envoy's clock puts them: {{.Describe $r.Shadow}}.</p>{{end}}
{{with .Rule.EnforcedAlone}}<p class="alone">Enforced, as the only rule, it would limit <b>{{num .Limited}}</b> of its {{num $r.Requests}} requests ({{pct .Limited $r.Requests}}), from {{num (int64 .KeysLimited)}} keys. Behind the enforced rules, which reject some requests before it sees them, it shadow-limited {{num $r.ShadowLimited}}.</p>{{end}}
<h4>requests per second, by decision</h4>
{{.Series}}
{{if .TopKeys}}<h4>{{.TopKeysTitle}}</h4>{{.TopKeys}}{{else}}<p class="none">No key was {{if .Rule.Shadow}}shadow-{{end}}limited.</p>{{end}}
{{if .Peaks}}<h4>{{.PeakTitle}}</h4>{{.Peaks}}
<div class="legend">{{range .Limits}}<div>{{.Name}}: {{if .HasBurstLine}}{{.Burst}}{{.BurstValue}} at once{{if not .BurstShown}} (beyond the chart){{end}}{{end}}{{if .HasRate}}{{if .HasBurstLine}}, {{end}}{{.Sustained}}{{.RateValue}} per second sustained{{if not .RateShown}} (beyond the chart){{end}}{{end}}</div>{{end}}</div>{{end}}
{{end}}</div>
{{end}}</div>
<div class="box"><h2>What this log cannot tell</h2><ul>
{{range .CannotTell}}<li>{{.}}</li>
{{end}}</ul></div>
{{.Summary.FleetHTML}}
</body>
</html>
`
