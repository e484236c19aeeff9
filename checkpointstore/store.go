// Package checkpointstore writes Event Hubs checkpoints into Azure Blob
// Storage where the Event Hubs SDKs' event processors read them: one blob
// per namespace/hub/consumer group/partition,
// "<namespace>/<hub>/<consumer-group>/checkpoint/<partition-id>", with the
// metadata "sequencenumber" and "offset". It writes them with the
// azeventhubs checkpoints package itself, so the Go processor reads exactly
// what it would have written.
//
// The Go store keeps the names as given; the Python, JavaScript, .NET and
// Java stores lower-case them. When the names differ in case (the default
// consumer group "$Default" does), the store writes both blobs, so a
// processor of any of these SDKs finds its checkpoint.
package checkpointstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehmirror/ehmirror/cutover"
)

// Options name the container. Set ConnectionString (a storage account
// connection string, e.g. Azurite's) with Container, or ContainerURL
// ("https://<account>.blob.core.windows.net/<container>") with Credential.
type Options struct {
	ConnectionString string
	Container        string
	ContainerURL     string
	Credential       azcore.TokenCredential
}

// Store writes checkpoints into one container. The container must exist
// (as for the SDKs' stores).
type Store struct {
	blobs *checkpoints.BlobStore
}

var _ cutover.CheckpointWriter = (*Store)(nil)

// New checks opts and returns a store. It does no network I/O.
func New(opts Options) (*Store, error) {
	var cc *container.Client
	var err error
	switch {
	case opts.ConnectionString != "" && opts.ContainerURL != "":
		return nil, errors.New("checkpointstore: set a connection string and container, or a container URL with a credential, not both")
	case opts.ConnectionString != "":
		if opts.Container == "" {
			return nil, errors.New("checkpointstore: container: the blob container name is required with a connection string")
		}
		cc, err = container.NewClientFromConnectionString(opts.ConnectionString, opts.Container, nil)
	case opts.ContainerURL != "":
		if opts.Credential == nil {
			return nil, errors.New("checkpointstore: a container URL needs a credential")
		}
		cc, err = container.NewClient(opts.ContainerURL, opts.Credential, nil)
	default:
		return nil, errors.New("checkpointstore: no storage connection string and no container URL")
	}
	if err != nil {
		// The connection string may hold a key: name the setting, not it.
		return nil, fmt.Errorf("checkpointstore: container client: %w", redactedError(err, opts.ConnectionString))
	}
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		return nil, fmt.Errorf("checkpointstore: %w", err)
	}
	return &Store{blobs: bs}, nil
}

// redactedError hides secret in err's text.
func redactedError(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[connection string]"))
}

// WriteCheckpoint stores cp as the checkpoint of one partition of hub for
// consumerGroup, under the names as given and, when they differ, under the
// lower-cased names the other SDKs read. It returns the blob names written.
func (s *Store) WriteCheckpoint(ctx context.Context, namespace, hub, consumerGroup, partitionID string, cp cutover.Checkpoint) ([]string, error) {
	seq, offset := cp.Sequence, cp.Offset
	names := [][3]string{{namespace, hub, consumerGroup}}
	lower := [3]string{strings.ToLower(namespace), strings.ToLower(hub), strings.ToLower(consumerGroup)}
	if lower != names[0] {
		names = append(names, lower)
	}
	var written []string
	for _, n := range names {
		c := azeventhubs.Checkpoint{
			FullyQualifiedNamespace: n[0], EventHubName: n[1], ConsumerGroup: n[2], PartitionID: partitionID,
			SequenceNumber: &seq, Offset: &offset,
		}
		if err := s.blobs.SetCheckpoint(ctx, c, nil); err != nil {
			return written, fmt.Errorf("checkpointstore: %s/%s/%s partition %s: %w", n[0], n[1], n[2], partitionID, err)
		}
		written = append(written, BlobName(n[0], n[1], n[2], partitionID))
	}
	return written, nil
}

// BlobName is the name of a partition's checkpoint blob.
func BlobName(namespace, hub, consumerGroup, partitionID string) string {
	return namespace + "/" + hub + "/" + consumerGroup + "/checkpoint/" + partitionID
}
