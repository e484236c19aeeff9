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
//
// It writes blob by blob on the condition that a blob is still what it
// read (If-Match its ETag, If-None-Match * for a new one), so that a
// processor's concurrent checkpoint is never overwritten; and its errors
// are one line (status and error code, or the network error), never
// Azure's multi-line XML.
package checkpointstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
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

// checkTimeout bounds Check: it answers within it, reachable or not.
const checkTimeout = 10 * time.Second

// Store reads and writes checkpoints in one container. The container must
// exist (as for the SDKs' stores).
type Store struct {
	// blobs reads and writes with a few quick retries; check tries once.
	blobs, check *container.Client
	name, host   string
}

var _ cutover.CheckpointStore = (*Store)(nil)

// New checks opts and returns a store. It does no network I/O.
func New(opts Options) (*Store, error) {
	s := &Store{name: opts.Container}
	// A failed write costs seconds, not the SDK's default of about 22 s
	// of retries; Check fails on the first try.
	quick := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: time.Second}}}
	once := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1, TryTimeout: checkTimeout}}}
	var err error
	switch {
	case opts.ConnectionString != "" && opts.ContainerURL != "":
		return nil, errors.New("checkpointstore: set a connection string and container, or a container URL with a credential, not both")
	case opts.ConnectionString != "":
		if opts.Container == "" {
			return nil, errors.New("checkpointstore: container: the blob container name is required with a connection string")
		}
		if s.blobs, err = container.NewClientFromConnectionString(opts.ConnectionString, opts.Container, quick); err == nil {
			s.check, err = container.NewClientFromConnectionString(opts.ConnectionString, opts.Container, once)
		}
	case opts.ContainerURL != "":
		if opts.Credential == nil {
			return nil, errors.New("checkpointstore: a container URL needs a credential")
		}
		if s.blobs, err = container.NewClient(opts.ContainerURL, opts.Credential, quick); err == nil {
			s.check, err = container.NewClient(opts.ContainerURL, opts.Credential, once)
		}
	default:
		return nil, errors.New("checkpointstore: no storage connection string and no container URL")
	}
	if err != nil {
		// The connection string may hold a key: name the setting, not it.
		return nil, fmt.Errorf("checkpointstore: container client: %w", redactedError(err, opts.ConnectionString))
	}
	if u, err := url.Parse(s.blobs.URL()); err == nil {
		s.host = u.Host
		if s.name == "" {
			s.name = strings.Trim(u.Path, "/")
		}
	}
	return s, nil
}

// redactedError hides secret in err's text.
func redactedError(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[connection string]"))
}

// Check makes sure the container exists and the store answers, trying
// once and within checkTimeout.
func (s *Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if _, err := s.check.GetProperties(ctx, nil); err != nil {
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return &Error{Msg: fmt.Sprintf("container %q does not exist at %s (create it: the processors' checkpoint store needs it too)", s.name, s.host), Err: err}
		}
		return s.oneLine(fmt.Sprintf("container %q", s.name), err)
	}
	return nil
}

// names are the blob names of one partition's checkpoint: as given and,
// when different, lower-cased.
func names(namespace, hub, consumerGroup, partitionID string) []string {
	given := BlobName(namespace, hub, consumerGroup, partitionID)
	lower := BlobName(strings.ToLower(namespace), strings.ToLower(hub), strings.ToLower(consumerGroup), partitionID)
	if lower == given {
		return []string{given}
	}
	return []string{given, lower}
}

// ReadCheckpoint reads the checkpoint blobs of one partition of hub for
// consumerGroup, under the names as given and, when they differ, under the
// lower-cased names the other SDKs read.
func (s *Store) ReadCheckpoint(ctx context.Context, namespace, hub, consumerGroup, partitionID string) (cutover.Stored, error) {
	var st cutover.Stored
	for _, name := range names(namespace, hub, consumerGroup, partitionID) {
		b := cutover.StoredBlob{Name: name}
		props, err := s.blobs.NewBlobClient(name).GetProperties(ctx, nil)
		switch {
		case bloberror.HasCode(err, bloberror.BlobNotFound):
		case err != nil:
			return st, s.oneLine("reading "+name, err)
		default:
			b.Exists = true
			if props.ETag != nil {
				b.Version = string(*props.ETag)
			}
			for k, v := range props.Metadata {
				if v == nil {
					continue
				}
				switch strings.ToLower(k) {
				case "sequencenumber":
					if n, err := strconv.ParseInt(*v, 10, 64); err == nil {
						b.Checkpoint.Sequence, b.HasSequence = n, true
					}
				case "offset":
					b.Checkpoint.Offset = *v
				}
			}
		}
		st.Blobs = append(st.Blobs, b)
	}
	return st, nil
}

// WriteCheckpoint stores cp in the blobs of stored, each on the condition
// that it is still as read (its ETag; absent: still absent), with the
// metadata the SDKs' stores read ("sequencenumber", "offset"). It returns
// the blob names written; a blob that changed fails with an error
// wrapping cutover.ErrCheckpointChanged.
func (s *Store) WriteCheckpoint(ctx context.Context, stored cutover.Stored, cp cutover.Checkpoint) ([]string, error) {
	seq, offset := strconv.FormatInt(cp.Sequence, 10), cp.Offset
	meta := map[string]*string{"sequencenumber": &seq, "offset": &offset}
	var written []string
	for _, b := range stored.Blobs {
		var err error
		bc := s.blobs.NewBlockBlobClient(b.Name)
		if b.Exists {
			etag := azcore.ETag(b.Version)
			_, err = bc.SetMetadata(ctx, meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
				ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}})
		} else {
			none := azcore.ETagAny
			_, err = bc.Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), &blockblob.UploadOptions{Metadata: meta,
				AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &none}}})
		}
		switch {
		case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists):
			return written, &Error{Msg: fmt.Sprintf("%s changed after it was read (a processor checkpointed): %v; not overwritten, re-run to see the stored value", b.Name, cutover.ErrCheckpointChanged), Err: cutover.ErrCheckpointChanged}
		case err != nil:
			return written, s.oneLine("writing "+b.Name, err)
		}
		written = append(written, b.Name)
	}
	return written, nil
}

// BlobName is the name of a partition's checkpoint blob.
func BlobName(namespace, hub, consumerGroup, partitionID string) string {
	return namespace + "/" + hub + "/" + consumerGroup + "/checkpoint/" + partitionID
}

// Error is a store failure in one line; Err is the cause (an
// *azcore.ResponseError, a network error, or a cutover sentinel).
type Error struct {
	Msg string
	Err error
}

// Error returns the one-line message.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// oneLine turns err from doing what into one line: the status and error
// code of an answer, or the network error (never a URL, which may carry
// a SAS token, nor Azure's XML).
func (s *Store) oneLine(what string, err error) error {
	var re *azcore.ResponseError
	var op *net.OpError
	var msg string
	switch {
	case errors.As(err, &re):
		msg = fmt.Sprintf("%s at %s: blob storage answered %d %s", what, s.host, re.StatusCode, re.ErrorCode)
		if re.StatusCode == 403 {
			msg += " (the identity needs the Storage Blob Data Contributor role on the container)"
		}
	case errors.As(err, &op):
		msg = fmt.Sprintf("%s: blob storage at %s unreachable: %v", what, s.host, op)
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("%s: blob storage at %s did not answer in time", what, s.host)
	default:
		line, _, _ := strings.Cut(err.Error(), "\n")
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			line = ue.Err.Error()
		}
		msg = fmt.Sprintf("%s at %s: %s", what, s.host, line)
	}
	return &Error{Msg: msg, Err: err}
}
