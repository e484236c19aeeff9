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

// sasConnStringFor embeds a SAS token signed for an arbitrary resource (sr).
func sasConnStringFor(addr, resource, keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;UseDevelopmentEmulator=true", addr, sasToken(resource, keyName, key, farFuture()))
}

// TestSchemelessResourceIsHostAndPath: an sr without a scheme (the namespace
// host, as the SDK's SAS helper signs it) is host plus optional path; a
// namespace-wide token covers every entity, a host/hub token only that hub.
func TestSchemelessResourceIsHostAndPath(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	nsWide := sasConnStringFor(srv.Addr(), srv.Addr(), DefaultKeyName, DefaultKey)
	for _, hubName := range []string{"prod.test1", "prod.test2"} {
		p := newProducer(t, nsWide, hubName)
		sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("ns-wide")})
		c := newConsumer(t, nsWide, hubName, azeventhubs.DefaultConsumerGroup)
		pc := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if got := receiveN(ctx, t, pc, 1); string(got[0].Body) != "ns-wide" {
			t.Fatalf("%s: received %q", hubName, got[0].Body)
		}
	}
	hubOnly := sasConnStringFor(srv.Addr(), srv.Addr()+"/prod.test1", DefaultKeyName, DefaultKey)
	sendBatch(ctx, t, newProducer(t, hubOnly, "prod.test1"), nil, &azeventhubs.EventData{Body: []byte("hub")})
	_, err := newProducer(t, hubOnly, "prod.test2").NewEventDataBatch(ctx, nil)
	wantUnauthorized(t, "token for prod.test1 used on prod.test2", err)
}

// TestPoliciesAndRights: several policies per namespace and per hub; a
// token whose policy lacks a right is accepted by put-token and the attach
// that needs it is refused with the service's text.
func TestPoliciesAndRights(t *testing.T) {
	t.Parallel()
	hubs := prodHubs()
	hubs[0].Policies = []Policy{{Name: "hub-sender", Key: "aHViLXNlbmRlcg==", Rights: []string{"Send"}}}
	srv := startServer(t, Config{Hubs: hubs, Policies: []Policy{
		{Name: "listen-only", Key: "bGlzdGVu", Rights: []string{"Listen"}},
		{Name: "send-only", Key: "c2VuZA==", Rights: []string{"Send"}},
		{Name: "both", Key: "Ym90aA==", Rights: []string{"Listen", "Send"}},
	}})
	ctx := testContext(t, 20*time.Second)
	addr := srv.Addr()

	listenOnly := connString(addr, "listen-only", "bGlzdGVu")
	_, err := newProducer(t, listenOnly, "prod.test1").NewEventDataBatch(ctx, nil)
	wantUnauthorized(t, "Listen-only producer", err)
	if !strings.Contains(err.Error(), "Description: Unauthorized access. 'Send' claim(s) are required to perform this operation") {
		t.Fatalf("Listen-only producer: %v", err)
	}
	if _, err := newProducer(t, listenOnly, "prod.test1").GetEventHubProperties(ctx, nil); err != nil {
		t.Fatalf("GetEventHubProperties with a Listen-only token: %v", err)
	}

	sendOnly := connString(addr, "send-only", "c2VuZA==")
	sendBatch(ctx, t, newProducer(t, sendOnly, "prod.test2"), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("x")})
	_, err = partitionClient(t, newConsumer(t, sendOnly, "prod.test2", azeventhubs.DefaultConsumerGroup), "0", nil).ReceiveEvents(ctx, 1, nil)
	wantUnauthorized(t, "Send-only consumer", err)
	if !strings.Contains(err.Error(), "Description: Unauthorized access. 'Listen' claim(s) are required to perform this operation") {
		t.Fatalf("Send-only consumer: %v", err)
	}

	both := connString(addr, "both", "Ym90aA==")
	sendBatch(ctx, t, newProducer(t, both, "prod.test3"), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("y")})
	pc := partitionClient(t, newConsumer(t, both, "prod.test3", azeventhubs.DefaultConsumerGroup), "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	receiveN(ctx, t, pc, 1)

	// A hub policy works on its hub (with a token scoped to it, as the
	// service requires) and nowhere else.
	hubCS := func(hubName string) string {
		return sasConnStringFor(addr, "amqp://"+addr+"/"+hubName, "hub-sender", "aHViLXNlbmRlcg==")
	}
	sendBatch(ctx, t, newProducer(t, hubCS("prod.test1"), "prod.test1"), nil, &azeventhubs.EventData{Body: []byte("z")})
	_, err = newProducer(t, hubCS("prod.test2"), "prod.test2").NewEventDataBatch(ctx, nil)
	wantUnauthorized(t, "hub policy on another hub", err)
	_, err = newProducer(t, sasConnStringFor(addr, "amqp://"+addr+"/", "hub-sender", "aHViLXNlbmRlcg=="), "prod.test1").NewEventDataBatch(ctx, nil)
	wantUnauthorized(t, "hub policy with a namespace-wide token", err)
}

// TestServiceErrorTexts: the descriptions and conditions clients match on.
func TestServiceErrorTexts(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	expired := sasConnString(srv.Addr(), DefaultKeyName, DefaultKey, time.Now().Add(-10*time.Minute))
	_, err := newProducer(t, expired, "prod.test1").NewEventDataBatch(ctx, nil)
	wantUnauthorized(t, "expired token", err)
	if !strings.Contains(err.Error(), "rpc: failed, status code 401 and description: ExpiredToken: The token is expired. Expiration time: '") {
		t.Fatalf("expired token: %v", err)
	}
	noRetry := azeventhubs.RetryOptions{MaxRetries: -1}
	cs := srv.ConnectionString()
	c, err := azeventhubs.NewConsumerClientFromConnectionString(cs, "prod.test1", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{InstanceID: "Winner"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	winner := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{OwnerLevel: ptr(int64(1)), StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	sendBatch(ctx, t, newProducer(t, cs, "prod.test1"), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("e")})
	receiveN(ctx, t, winner, 1)
	loserClient, err := azeventhubs.NewConsumerClientFromConnectionString(cs, "prod.test1", azeventhubs.DefaultConsumerGroup,
		&azeventhubs.ConsumerClientOptions{InstanceID: "LosesBecauseOfLowOwnerLevel", RetryOptions: noRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer loserClient.Close(ctx)
	loser := partitionClient(t, loserClient, "0", &azeventhubs.PartitionClientOptions{OwnerLevel: ptr(int64(0))})
	_, err = loser.ReceiveEvents(ctx, 1, nil)
	want := "Description: Receiver 'Winner' with a higher epoch '1' already exists. Receiver 'LosesBecauseOfLowOwnerLevel' with epoch 0 cannot be created. Make sure you are creating receiver with increasing epoch value to ensure connectivity, or ensure all old epoch receivers are closed or disconnected"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lower epoch: %v", err)
	}
}
