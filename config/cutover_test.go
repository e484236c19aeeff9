package config

import (
	"slices"
	"testing"
)

func TestLoadCutover(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	conn := "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net"
	c, p := LoadCutover(env(map[string]string{CutoverStorage: conn, CutoverContainer: "checkpoints"}))
	if len(p) != 0 || c.StorageConnectionString != conn || c.Container != "checkpoints" {
		t.Fatalf("LoadCutover = %+v, %v", c, p)
	}
	if !slices.Contains(Secrets(env(map[string]string{CutoverStorage: conn})), conn) {
		t.Fatal("the storage connection string is not a secret")
	}
	for _, bad := range []map[string]string{
		{CutoverStorage: conn, CutoverStorageURI: "https://acct.blob.core.windows.net"},
		{CutoverStorage: "not a connection string"},
		{CutoverStorage: "UseDevelopmentStorage=true"},
		{CutoverStorageURI: "acct.blob.core.windows.net"},
	} {
		if _, p := LoadCutover(env(bad)); len(p) != 1 {
			t.Errorf("LoadCutover(%v): problems %v, want one", bad, p)
		}
	}
	if _, p := LoadCutover(env(nil)); len(p) != 0 {
		t.Errorf("no settings: problems %v", p)
	}
}
