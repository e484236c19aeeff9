package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func connString(addr, keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", addr, keyName, key)
}

// sasConnString builds a connection string that embeds a SAS token for the
// namespace, signed with key and expiring at expiry.
func sasConnString(addr, keyName, key string, expiry time.Time) string {
	token := sasToken("amqp://"+addr+"/", keyName, key, expiry)
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;UseDevelopmentEmulator=true", addr, token)
}

// sasToken signs a SAS token for resource the way the SDK does: sr is the
// lower-case, query-escaped resource.
func sasToken(resource, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := strconv.FormatInt(expiry.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + keyName
}

func farFuture() time.Time { return time.Now().Add(time.Hour) }

func wantUnauthorized(t *testing.T, what string, err error) {
	t.Helper()
	var azErr *azeventhubs.Error
	if !errors.As(err, &azErr) || azErr.Code != azeventhubs.ErrorCodeUnauthorizedAccess {
		t.Fatalf("%s: got error %v, want an *azeventhubs.Error with code %q", what, err, azeventhubs.ErrorCodeUnauthorizedAccess)
	}
}

func TestWrongCredentialsAreUnauthorized(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	cases := map[string]string{
		"wrong key":      connString(srv.Addr(), DefaultKeyName, "not-the-key"),
		"wrong key name": connString(srv.Addr(), "SomeOtherPolicy", DefaultKey),
		"expired token":  sasConnString(srv.Addr(), DefaultKeyName, DefaultKey, time.Now().Add(-time.Minute)),
	}
	for name, cs := range cases {
		t.Run(name, func(t *testing.T) {
			p := newProducer(t, cs, "prod.test1")
			_, err := p.NewEventDataBatch(ctx, nil)
			wantUnauthorized(t, "NewEventDataBatch", err)

			c := newConsumer(t, cs, "prod.test1", azeventhubs.DefaultConsumerGroup)
			pc := partitionClient(t, c, "0", nil)
			_, err = pc.ReceiveEvents(ctx, 1, nil)
			wantUnauthorized(t, "ReceiveEvents", err)

			if _, err := p.GetEventHubProperties(ctx, nil); err == nil || !strings.Contains(err.Error(), "401") {
				t.Fatalf("GetEventHubProperties: got %v, want a 401 error", err)
			}
		})
	}
	if got := srv.Stats().EventsStored; got != 0 {
		t.Fatalf("%d events stored with bad credentials", got)
	}
}

func TestValidCredentialsWork(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs(), KeyName: "MyPolicy", Key: "c2VjcmV0"})
	ctx := testContext(t, 20*time.Second)
	for name, cs := range map[string]string{
		"key":       srv.ConnectionString(),
		"sas token": sasConnString(srv.Addr(), "MyPolicy", "c2VjcmV0", time.Now().Add(time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(srv.ConnectionString(), "SharedAccessKeyName=MyPolicy;SharedAccessKey=c2VjcmV0;") {
				t.Fatalf("ConnectionString() = %q", srv.ConnectionString())
			}
			p := newProducer(t, cs, "prod.test2")
			sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("1")}, &azeventhubs.EventData{Body: []byte(name)})
			if _, err := p.GetPartitionProperties(ctx, "1", nil); err != nil {
				t.Fatalf("GetPartitionProperties: %v", err)
			}
		})
	}
}

func TestAcceptAnyToken(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs(), AcceptAnyToken: true})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, connString(srv.Addr(), "anything", "wrong"), "prod.test3")
	sendBatch(ctx, t, p, nil, &azeventhubs.EventData{Body: []byte("x")})
	if _, err := p.GetEventHubProperties(ctx, nil); err != nil {
		t.Fatalf("GetEventHubProperties: %v", err)
	}
}
