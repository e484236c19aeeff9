// Checks the KQL of the alerts and the dashboard (infra/alerts.tf,
// infra/dashboard.tf) offline with Microsoft's Kusto language service
// (Kusto.Language, the parser and analyser behind Azure Monitor's query
// editor): every query is rendered as Terraform would render it (locals,
// variable defaults) and must parse and analyse without an error against the
// workspace tables it reads. Azure rejects an alert rule whose query does not
// compile, so this is what keeps a first `terraform apply` from failing on
// a typo in a query.
//
// Usage: node scripts/kqlcheck/check.js <infra dir>
// (the package @kusto/language-service-next must be resolvable, e.g. through
// NODE_PATH; scripts/terraform-check.sh installs it).
'use strict';

const fs = require('fs');
const path = require('path');

require('@kusto/language-service-next/bridge.js');
require('@kusto/language-service-next/Kusto.Language.Bridge.js');
/* global Kusto */
const K = Kusto.Language;
const S = K.Symbols;

// The workspace tables the queries read (columns as documented for Azure
// Monitor Logs: AppTraces, AppRequests, AzureMetrics).
const TABLES = {
  AppTraces: '(TimeGenerated:datetime, Message:string, SeverityLevel:int, Properties:dynamic, AppRoleName:string, AppRoleInstance:string, OperationId:string, OperationName:string, _ResourceId:string)',
  AppRequests: '(TimeGenerated:datetime, Name:string, Success:bool, ResultCode:string, DurationMs:real, OperationId:string, OperationName:string, AppRoleName:string, _ResourceId:string)',
  AzureMetrics: '(TimeGenerated:datetime, _ResourceId:string, ResourceId:string, Resource:string, ResourceProvider:string, MetricName:string, Total:real, Count:real, Maximum:real, Minimum:real, Average:real, TimeGrain:string, UnitName:string)',
};

// Expressions other than locals and variables that the queries interpolate,
// with a value of the same shape.
const EXPRESSIONS = {
  'lower(azurerm_eventhub_namespace.this.id)': '/subscriptions/00000000-0000-0000-0000-000000000005/resourcegroups/rg-ehmirror-prod/providers/microsoft.eventhub/namespaces/evhns-ehmirror-prod-abc123',
  'local.function_timeout_ms': '600000',
  'local.kql_function_apps': 'datatable(app: string)["func-ehmirror-prod-abc123","func-ehmirror-prod-abc123-2"]',
  'var.alert_backlog_age_minutes * 60000': '600000',
  'var.alert_paused_hours * 3600000': '86400000',
};

function fail(msg) {
  console.error('kqlcheck: ' + msg);
  process.exit(1);
}

const dir = process.argv[2];
if (!dir) fail('usage: node check.js <infra dir>');
const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8');
const tf = fs.readdirSync(dir).filter((f) => f.endsWith('.tf'));

// Heredocs named like `name = <<-KQL … KQL`.
const heredocs = {};
for (const f of ['alerts.tf', 'dashboard.tf']) {
  const re = /(\w+)\s*=\s*<<-KQL\n([\s\S]*?)\n\s*KQL\n/g;
  let m;
  while ((m = re.exec(read(f))) !== null) heredocs[m[1]] = { file: f, body: m[2] };
}
if (Object.keys(heredocs).length === 0) fail('no <<-KQL heredocs in alerts.tf / dashboard.tf');

// Variable defaults (numbers and plain strings).
const defaults = {};
for (const f of tf) {
  const re = /variable\s+"(\w+)"\s*\{[\s\S]*?\n\s*default\s*=\s*([^\n]+)/g;
  let m;
  while ((m = re.exec(read(f))) !== null) defaults[m[1]] = m[2].trim().replace(/^"(.*)"$/, '$1');
}

function render(name, seen) {
  if (seen.includes(name)) fail(`${name}: interpolation loop ${seen.join(' -> ')}`);
  return heredocs[name].body.replace(/\$\{([^}]*)\}/g, (all, expr) => {
    expr = expr.trim();
    let m;
    if ((m = /^local\.(\w+)$/.exec(expr)) && heredocs[m[1]]) return render(m[1], seen.concat(name));
    if ((m = /^var\.(\w+)$/.exec(expr)) && m[1] in defaults) return defaults[m[1]];
    if (expr in EXPRESSIONS) return EXPRESSIONS[expr];
    return fail(`${heredocs[name].file}: ${name}: cannot render \${${expr}}; add it to EXPRESSIONS in scripts/kqlcheck/check.js`);
  });
}

const tables = Object.entries(TABLES).map(([n, schema]) => S.TableSymbol.From(schema).WithName(n));
const db = new S.DatabaseSymbol.$ctor1('workspace', tables, false);
const globals = K.GlobalState.Default.WithCluster(new S.ClusterSymbol.$ctor1('cluster', [db], false)).WithDatabase(db);

let errors = 0;
for (const name of Object.keys(heredocs).sort()) {
  const text = render(name, []);
  const diags = K.KustoCode.ParseAndAnalyze(text, globals).GetDiagnostics();
  const found = [];
  for (let i = 0; i < diags.Count; i++) {
    const d = diags.getItem(i);
    if (String(d.Severity) === 'Error') found.push(d);
  }
  if (found.length === 0) {
    console.log(`ok   ${heredocs[name].file}: ${name}`);
    continue;
  }
  errors += found.length;
  for (const d of found) {
    const before = text.slice(0, d.Start);
    const line = before.split('\n').length;
    console.error(`FAIL ${heredocs[name].file}: ${name}: line ${line} of the query: ${d.Message} (near ${JSON.stringify(text.slice(d.Start, d.Start + 30))})`);
  }
}
if (errors > 0) fail(`${errors} error(s) in the alerts' and dashboard's KQL`);
console.log(`kqlcheck: ${Object.keys(heredocs).length} queries parse and analyse without errors`);
