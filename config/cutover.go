package config

import (
	"net/url"
	"strings"
)

// Settings of the consumer cut-over (POST /api/cutover, scripts/cutover):
// the Blob container where the Event Hubs consumers' processors keep their
// checkpoints. CutoverStorage is a storage account connection string (a
// secret); CutoverStorageURI is the account's blob endpoint, used with the
// app's identity (the Functions identity-based connection convention).
const (
	CutoverStorage    = "CUTOVER_STORAGE"
	CutoverStorageURI = "CUTOVER_STORAGE__blobServiceUri"
	CutoverContainer  = "CUTOVER_CONTAINER"
)

// Cutover is where cut-over checkpoints go; every field may be empty (the
// request may then name a blob service URI and container itself).
type Cutover struct {
	StorageConnectionString string
	BlobServiceURI          string
	Container               string
}

// LoadCutover reads the cut-over settings. They are optional: problems are
// only malformed values.
func LoadCutover(getenv func(string) string) (Cutover, Problems) {
	l := loader{getenv: getenv}
	c := Cutover{
		StorageConnectionString: l.secret(CutoverStorage),
		BlobServiceURI:          l.text(CutoverStorageURI, ""),
		Container:               l.text(CutoverContainer, ""),
	}
	if c.StorageConnectionString != "" && c.BlobServiceURI != "" {
		l.problem(CutoverStorageURI, "set together with %s; set one", CutoverStorage)
	}
	switch lower := strings.ToLower(c.StorageConnectionString); {
	case lower == "":
	case strings.HasPrefix(lower, "usedevelopmentstorage="):
		l.problem(CutoverStorage, "UseDevelopmentStorage is not supported by the Blob client; write Azurite's connection string out (AccountName=devstoreaccount1;AccountKey=…;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1)")
	case !strings.Contains(lower, "accountname=") && !strings.Contains(lower, "blobendpoint="):
		l.problem(CutoverStorage, "is not a storage account connection string (no AccountName or BlobEndpoint)")
	}
	if c.BlobServiceURI != "" {
		if u, err := url.Parse(c.BlobServiceURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			l.problem(CutoverStorageURI, "%q: want https://<account>.blob.core.windows.net", c.BlobServiceURI)
		}
	}
	return c, l.problems
}
