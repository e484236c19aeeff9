package faults

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// resourceProviderOf maps the Terraform resource types infra/ may declare to
// the Azure resource provider namespace behind them. A type missing here
// fails TestTerraformRegistersEveryResourceProvider: whoever adds a resource
// type decides which namespace it needs. Microsoft.Resources and
// Microsoft.Authorization are registered on every subscription.
var resourceProviderOf = map[string]string{
	"azurerm_resource_group":                         "Microsoft.Resources",
	"azurerm_role_assignment":                        "Microsoft.Authorization",
	"azurerm_eventhub_namespace":                     "Microsoft.EventHub",
	"azurerm_eventhub":                               "Microsoft.EventHub",
	"azurerm_eventhub_consumer_group":                "Microsoft.EventHub",
	"azurerm_storage_account":                        "Microsoft.Storage",
	"azurerm_storage_container":                      "Microsoft.Storage",
	"azurerm_storage_share":                          "Microsoft.Storage",
	"azurerm_key_vault":                              "Microsoft.KeyVault",
	"azurerm_key_vault_secret":                       "Microsoft.KeyVault",
	"azurerm_user_assigned_identity":                 "Microsoft.ManagedIdentity",
	"azurerm_service_plan":                           "Microsoft.Web",
	"azurerm_linux_function_app":                     "Microsoft.Web",
	"azurerm_log_analytics_workspace":                "Microsoft.OperationalInsights",
	"azurerm_application_insights":                   "Microsoft.Insights",
	"azurerm_application_insights_workbook":          "Microsoft.Insights",
	"azurerm_monitor_action_group":                   "Microsoft.Insights",
	"azurerm_monitor_diagnostic_setting":             "Microsoft.Insights",
	"azurerm_monitor_metric_alert":                   "Microsoft.Insights",
	"azurerm_monitor_scheduled_query_rules_alert_v2": "Microsoft.Insights",
	"azurerm_private_endpoint":                       "Microsoft.Network",
	"azurerm_private_dns_zone":                       "Microsoft.Network",
	"azurerm_private_dns_zone_virtual_network_link":  "Microsoft.Network",
}

// alwaysRegistered are namespaces every subscription has registered.
var alwaysRegistered = []string{"Microsoft.Resources", "Microsoft.Authorization"}

// TestTerraformRegistersEveryResourceProvider (issue 24, item 1): azurerm v5
// registers no resource provider by default, and the module registers the
// ones in local.resource_providers. Every azurerm resource type the module
// declares must have its namespace in that list, or a first apply on a
// fresh subscription stops with MissingSubscriptionRegistration.
func TestTerraformRegistersEveryResourceProvider(t *testing.T) {
	root, err := parseHCLDir("../infra")
	if err != nil {
		t.Fatal(err)
	}
	var list string
	for _, l := range root.blocks("locals") {
		if v, ok := l.Body.Attrs["resource_providers"]; ok {
			list = v
		}
	}
	if list == "" {
		t.Fatal("infra/ has no local.resource_providers")
	}
	var registered []string
	for _, m := range regexp.MustCompile(`"(Microsoft\.[A-Za-z]+)"`).FindAllStringSubmatch(list, -1) {
		registered = append(registered, m[1])
	}
	var types []string
	for _, bl := range root.blocks("resource") {
		if strings.HasPrefix(bl.Labels[0], "azurerm_") && !slices.Contains(types, bl.Labels[0]) {
			types = append(types, bl.Labels[0])
		}
	}
	if len(types) < 10 {
		t.Fatalf("found only %d azurerm resource types in infra/: %q", len(types), types)
	}
	for _, typ := range types {
		ns, ok := resourceProviderOf[typ]
		switch {
		case !ok:
			t.Errorf("resource type %s: its resource provider is unknown to this test; add it to resourceProviderOf", typ)
		case slices.Contains(alwaysRegistered, ns):
		case !slices.Contains(registered, ns):
			t.Errorf("resource type %s needs %s, which is not in local.resource_providers %q", typ, ns, registered)
		}
	}
	// The deployment guide and infra/README.md tell an operator without
	// */register/action what to register by hand: the same list.
	for _, readme := range []string{"../docs/deploying.md", "../infra/README.md"} {
		text := readFile(t, readme)
		for _, ns := range registered {
			if !strings.Contains(text, ns) {
				t.Errorf("%s does not name resource provider %s", readme, ns)
			}
		}
	}
}

// readFile returns a file's text or fails the test.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
