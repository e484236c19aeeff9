package eventhubs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/go-amqp"

	"github.com/ehmirror/ehmirror/mirror"
)

// AMQP conditions Event Hubs uses that the mirror reacts to.
const (
	condServerBusy = "com.microsoft:server-busy"
	condNotFound   = "amqp:not-found"
	// condOutOfRange is the service's answer to a partition id the hub
	// does not have ("The specified partition is invalid …").
	condOutOfRange    = "com.microsoft:argument-out-of-range"
	condMessageTooBig = "amqp:link:message-size-exceeded"
)

// rpcError is satisfied by the SDK's management errors, which carry the
// status code of the response.
type rpcError interface{ RPCCode() int }

// classify wraps an SDK error with the mirror error that says what to do.
func classify(err error) error {
	var ehErr *azeventhubs.Error
	if errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeUnauthorizedAccess {
		return fmt.Errorf("%w: check the connection string or the identity's role assignment (Azure Event Hubs Data Sender): %w", mirror.ErrUnauthorized, err)
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch string(amqpErr.Condition) {
		case condServerBusy:
			return fmt.Errorf("%w: %w", mirror.ErrThrottled, err)
		case condNotFound, condOutOfRange:
			return fmt.Errorf("%w: %w", mirror.ErrHubNotFound, err)
		case condMessageTooBig:
			return fmt.Errorf("%w: %w", mirror.ErrEventTooLarge, err)
		case string(amqp.ErrCondUnauthorizedAccess):
			return fmt.Errorf("%w: %w", mirror.ErrUnauthorized, err)
		}
	}
	var rpc rpcError
	if errors.As(err, &rpc) {
		switch rpc.RPCCode() {
		case 401:
			return fmt.Errorf("%w: %w", mirror.ErrUnauthorized, err)
		case 404:
			return fmt.Errorf("%w: %w", mirror.ErrHubNotFound, err)
		}
	}
	// GetEventHubProperties wraps a failed response in a plain error.
	if msg := err.Error(); strings.Contains(msg, "status code 404") {
		return fmt.Errorf("%w: %w", mirror.ErrHubNotFound, err)
	}
	return err
}
