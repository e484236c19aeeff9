package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"golang.org/x/net/websocket"
)

// TestTLSAndWebSocketTransports: the Go SDK sends and receives over amqps
// (TLS, as on port 5671) and over AMQP over WebSockets (wss, path
// /$servicebus/websocket, subprotocol amqp) with SAS checks on.
func TestTLSAndWebSocketTransports(t *testing.T) {
	t.Parallel()
	cert, certPEM, _, err := SelfSignedCertificate("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	srv := startServer(t, Config{Hubs: prodHubs(), TLSListen: "127.0.0.1:0", WebSocketListen: "127.0.0.1:0", TLSCertificate: &cert})
	ctx := testContext(t, 30*time.Second)

	_, tlsPort, _ := net.SplitHostPort(srv.TLSAddr())
	_, wsPort, _ := net.SplitHostPort(srv.WebSocketAddr())
	cs := func(port string) string {
		return fmt.Sprintf("Endpoint=sb://localhost:%s;SharedAccessKeyName=%s;SharedAccessKey=%s", port, DefaultKeyName, DefaultKey)
	}
	dialWS := func(ctx context.Context, args azeventhubs.WebSocketConnParams) (net.Conn, error) {
		cfg, err := websocket.NewConfig("wss://localhost:"+wsPort+WebSocketPath, "https://localhost/")
		if err != nil {
			return nil, err
		}
		cfg.Protocol, cfg.TlsConfig = []string{"amqp"}, tlsCfg
		ws, err := cfg.DialContext(ctx)
		if err != nil {
			return nil, err
		}
		ws.PayloadType = websocket.BinaryFrame
		return ws, nil
	}
	for _, tc := range []struct {
		name string
		cs   string
		ws   func(context.Context, azeventhubs.WebSocketConnParams) (net.Conn, error)
		part string
	}{
		{"amqps", cs(tlsPort), nil, "1"},
		{"websocket", cs(wsPort), dialWS, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := azeventhubs.NewProducerClientFromConnectionString(tc.cs, "prod.test1", &azeventhubs.ProducerClientOptions{
				TLSConfig: tlsCfg, NewWebSocketConn: tc.ws, RetryOptions: fastRetry})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			if props, err := p.GetEventHubProperties(ctx, nil); err != nil || len(props.PartitionIDs) != 4 {
				t.Fatalf("GetEventHubProperties: %+v, %v", props, err)
			}
			sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: &tc.part}, &azeventhubs.EventData{Body: []byte(tc.name)})
			c, err := azeventhubs.NewConsumerClientFromConnectionString(tc.cs, "prod.test1", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{
				TLSConfig: tlsCfg, NewWebSocketConn: tc.ws, RetryOptions: fastRetry})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			pc := partitionClient(t, c, tc.part, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
			if got := receiveN(ctx, t, pc, 1); string(got[0].Body) != tc.name {
				t.Fatalf("received %q", got[0].Body)
			}
		})
	}
}
