package emulator

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadConfigFile(t *testing.T) {
	hubs, err := LoadConfigFile("testdata/Config.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []HubConfig{
		{Name: "eh1", PartitionCount: 2, ConsumerGroups: []string{"cg1"}},
		{Name: "prod.test1", PartitionCount: 4},
	}
	if !reflect.DeepEqual(hubs, want) {
		t.Fatalf("LoadConfigFile = %+v, want %+v", hubs, want)
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	entity := func(name, count string) string {
		return `{"Name":"` + name + `","PartitionCount":` + count + `,"ConsumerGroups":[]}`
	}
	doc := func(entities ...string) string {
		return `{"UserConfig":{"NamespaceConfig":[{"Type":"EventHub","Name":"ns","Entities":[` + strings.Join(entities, ",") + `]}]}}`
	}
	cases := []struct {
		name, content, want string
	}{
		{"bad-json", "{\"UserConfig\": {\n  \"NamespaceConfig\": [,]}}", "invalid JSON at line 2"},
		{"empty", "", "invalid JSON"},
		{"no-user-config", `{}`, "UserConfig: missing"},
		{"count-high", doc(entity("a", `"33"`)), `UserConfig.NamespaceConfig[0].Entities[0].PartitionCount: 33 is out of range 1..32`},
		{"count-zero", doc(entity("a", `"0"`)), `Entities[0].PartitionCount: 0 is out of range`},
		{"count-text", doc(entity("a", `"four"`)), `Entities[0].PartitionCount: "four" is not an integer`},
		{"count-missing", doc(`{"Name":"a"}`), `Entities[0].PartitionCount: missing`},
		{"duplicate", doc(entity("a", `"1"`), entity("A", `"2"`)), `Entities[1].Name: duplicate event hub "A"`},
		{"no-name", doc(entity("", `"1"`)), `Entities[0].Name: empty event hub name`},
		{"wrong-type", `{"UserConfig":{"NamespaceConfig":[{"Type":"ServiceBus","Entities":[]}]}}`, `NamespaceConfig[0].Type: unsupported type "ServiceBus"`},
		{"wrong-json-type", `{"UserConfig":{"NamespaceConfig":{}}}`, `UserConfig.NamespaceConfig: JSON object`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfigFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line starting with the file and containing %q", msg, tc.want)
			}
		})
	}
	_, err := LoadConfigFile(filepath.Join(dir, "missing.json"))
	if err == nil || !strings.Contains(err.Error(), "missing.json: cannot read config") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestPartitionCountAsNumber(t *testing.T) {
	hubs, err := parseConfig("x.json", []byte(`{"UserConfig":{"NamespaceConfig":[{"Entities":[{"Name":"h","PartitionCount":3}]}]}}`))
	if err != nil || len(hubs) != 1 || hubs[0].PartitionCount != 3 {
		t.Fatalf("got %+v, %v", hubs, err)
	}
}

// TestConfigFileAuthAdditions: policies, role assignments and EntraId are
// additions to Microsoft's format.
func TestConfigFileAuthAdditions(t *testing.T) {
	doc := `{"UserConfig":{"NamespaceConfig":[{"Type":"EventHub","Name":"ns",
	  "SharedAccessPolicies":[{"Name":"listen","Key":"a2V5","Rights":["Listen"]}],
	  "RoleAssignments":[{"Principal":"oid-1","Role":"Azure Event Hubs Data Owner"}],
	  "EntraId":{"TrustUnsignedTokensFromLoopback":true},
	  "Entities":[{"Name":"eh1","PartitionCount":"2","ConsumerGroups":[],
	    "SharedAccessPolicies":[{"Name":"send","Key":"c2VuZA==","Rights":["Send"]}],
	    "RoleAssignments":[{"Principal":"oid-2","Role":"Azure Event Hubs Data Sender"}]}]}]}}`
	cfg, err := parseConfigFile("x.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Hubs:     []HubConfig{{Name: "eh1", PartitionCount: 2, Policies: []Policy{{Name: "send", Key: "c2VuZA==", Rights: []string{"Send"}}}}},
		Policies: []Policy{{Name: "listen", Key: "a2V5", Rights: []string{"Listen"}}},
		EntraID: EntraID{TrustUnsignedFromLoopback: true, RoleAssignments: []RoleAssignment{
			{Principal: "oid-1", Role: RoleDataOwner}, {Principal: "oid-2", Role: RoleDataSender, Hub: "eh1"}}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
	for bad, wantErr := range map[string]string{
		`"SharedAccessPolicies":[{"Name":"x","Key":"k","Rights":["Read"]}]`: `UserConfig.NamespaceConfig[0].SharedAccessPolicies[0].Rights[0]: unknown right "Read"`,
		`"SharedAccessPolicies":[{"Name":"x"}]`:                             `SharedAccessPolicies[0]: a policy needs a Name and a Key`,
		`"RoleAssignments":[{"Principal":"p","Role":"Reader"}]`:             `EntraID.RoleAssignments[0].Role: unknown role "Reader"`,
	} {
		_, err := parseConfigFile("x.json", []byte(`{"UserConfig":{"NamespaceConfig":[{`+bad+`,"Entities":[]}]}}`))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.HasPrefix(err.Error(), "x.json: ") {
			t.Errorf("%s: got %v, want %q", bad, err, wantErr)
		}
	}
}
