package amqp

import (
	"fmt"
	"math"
)

// fields iterates the fields of a composite value. Absent trailing fields and
// null fields both read as "not present". The first error sticks.
type fields struct {
	d    Decoder
	n    int
	err  error
	name string // the composite's name, for error messages
}

func decodeComposite(d *Decoder, want uint64, name string) (fields, error) {
	code, sym, err := d.ReadDescriptor()
	if err != nil {
		return fields{}, fmt.Errorf("%s: %w", name, err)
	}
	if code != want {
		return fields{}, fmt.Errorf("%w: %s: descriptor 0x%x %q, want 0x%x", ErrMalformed, name, code, sym, want)
	}
	body, n, err := d.ReadList()
	if err != nil {
		return fields{}, fmt.Errorf("%s: %w", name, err)
	}
	return fields{d: body, n: n, name: name}, nil
}

func decodeBody(body []byte, want uint64, name string) (fields, error) {
	d := Decoder{b: body}
	return decodeComposite(&d, want, name)
}

// present consumes the next field's null, if any, and reports whether the
// field holds a value that must now be read.
func (f *fields) present() bool {
	if f.err != nil || f.n == 0 {
		return false
	}
	f.n--
	if f.d.ReadNull() {
		return false
	}
	if len(f.d.b) == 0 {
		f.err = malformed("%s: field count exceeds the encoded fields", f.name)
		return false
	}
	return true
}

func (f *fields) fail(field string, err error) bool {
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s.%s: %w", f.name, field, err)
	}
	return err == nil
}

func (f *fields) required(ok bool, field string) {
	if !ok && f.err == nil {
		f.err = malformed("%s: mandatory field %s is missing", f.name, field)
	}
}

func (f *fields) skip() {
	if f.present() {
		f.fail("?", f.d.Skip())
	}
}

func (f *fields) string(dst *string, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadString()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) symbol(dst *Symbol, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadString()
	*dst = Symbol(v)
	return f.fail(field, err)
}

func (f *fields) uint(dst *uint32, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadUint()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) optUint(dst **uint32, field string) {
	var v uint32
	if f.uint(&v, field) {
		*dst = &v
	}
}

func (f *fields) ulong(dst *uint64, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadUlong()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) ushort(dst *uint16, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadUshort()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) ubyte(dst *uint8, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadUbyte()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) optUbyte(dst **uint8, field string) {
	var v uint8
	if f.ubyte(&v, field) {
		*dst = &v
	}
}

func (f *fields) bool(dst *bool, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadBool()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) binary(dst *[]byte, field string) bool {
	if !f.present() {
		return false
	}
	v, err := f.d.ReadBinary()
	*dst = v
	return f.fail(field, err)
}

func (f *fields) symbols(dst *[]Symbol, field string) {
	if f.err != nil || f.n == 0 {
		return
	}
	f.n--
	v, err := f.d.ReadSymbols()
	*dst = v
	f.fail(field, err)
}

func (f *fields) fieldsMap(dst *Map, field string) {
	if !f.present() {
		return
	}
	v, err := f.d.ReadMap()
	*dst = v
	f.fail(field, err)
}

func (f *fields) raw(dst *[]byte, field string) {
	if !f.present() {
		return
	}
	v, err := f.d.Raw()
	*dst = v
	f.fail(field, err)
}

func (f *fields) errorField(dst **Error, field string) {
	if !f.present() {
		return
	}
	e := new(Error)
	if f.fail(field, e.decode(&f.d)) {
		*dst = e
	}
}

// Open is the open performative (transport §2.7.1).
type Open struct {
	ContainerID         string
	Hostname            string
	MaxFrameSize        uint32 // default math.MaxUint32
	ChannelMax          uint16 // default math.MaxUint16
	IdleTimeout         uint32 // milliseconds; 0 means none
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Unmarshal decodes an open frame body.
func (o *Open) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeOpen, "open")
	if err != nil {
		return err
	}
	*o = Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}
	f.required(f.string(&o.ContainerID, "container-id"), "container-id")
	f.string(&o.Hostname, "hostname")
	f.uint(&o.MaxFrameSize, "max-frame-size")
	f.ushort(&o.ChannelMax, "channel-max")
	f.uint(&o.IdleTimeout, "idle-time-out")
	f.skip() // outgoing-locales
	f.skip() // incoming-locales
	f.symbols(&o.OfferedCapabilities, "offered-capabilities")
	f.symbols(&o.DesiredCapabilities, "desired-capabilities")
	f.fieldsMap(&o.Properties, "properties")
	return f.err
}

// Append encodes o; fields equal to their defaults are omitted.
func (o *Open) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeOpen)
	l.string(o.ContainerID)
	l.optString(o.Hostname)
	if o.MaxFrameSize != math.MaxUint32 && o.MaxFrameSize != 0 {
		l.uint(o.MaxFrameSize)
	} else {
		l.null()
	}
	if o.ChannelMax != math.MaxUint16 {
		l.ushort(o.ChannelMax)
	} else {
		l.null()
	}
	if o.IdleTimeout != 0 {
		l.uint(o.IdleTimeout)
	} else {
		l.null()
	}
	l.null()
	l.null()
	l.symbols(o.OfferedCapabilities)
	l.symbols(o.DesiredCapabilities)
	if err := l.optMap(o.Properties); err != nil {
		return b, err
	}
	return l.finish(), nil
}

// Begin is the begin performative (transport §2.7.2).
type Begin struct {
	RemoteChannel  *uint16
	NextOutgoingID uint32
	IncomingWindow uint32
	OutgoingWindow uint32
	HandleMax      uint32 // default math.MaxUint32
	Properties     Map
}

// Unmarshal decodes a begin frame body.
func (x *Begin) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeBegin, "begin")
	if err != nil {
		return err
	}
	*x = Begin{HandleMax: math.MaxUint32}
	var ch uint16
	if f.ushort(&ch, "remote-channel") {
		x.RemoteChannel = &ch
	}
	f.required(f.uint(&x.NextOutgoingID, "next-outgoing-id"), "next-outgoing-id")
	f.required(f.uint(&x.IncomingWindow, "incoming-window"), "incoming-window")
	f.required(f.uint(&x.OutgoingWindow, "outgoing-window"), "outgoing-window")
	f.uint(&x.HandleMax, "handle-max")
	f.skip() // offered-capabilities
	f.skip() // desired-capabilities
	f.fieldsMap(&x.Properties, "properties")
	return f.err
}

// Append encodes x.
func (x *Begin) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeBegin)
	if x.RemoteChannel != nil {
		l.ushort(*x.RemoteChannel)
	} else {
		l.null()
	}
	l.uint(x.NextOutgoingID)
	l.uint(x.IncomingWindow)
	l.uint(x.OutgoingWindow)
	if x.HandleMax != math.MaxUint32 && x.HandleMax != 0 {
		l.uint(x.HandleMax)
	} else {
		l.null()
	}
	l.null() // offered-capabilities
	l.null() // desired-capabilities
	l.null() // properties
	return l.finish(), nil
}

// Role is a link endpoint's role: false for sender, true for receiver.
type Role bool

// The two roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// String returns "sender" or "receiver".
func (r Role) String() string {
	if r == RoleReceiver {
		return "receiver"
	}
	return "sender"
}

// Settlement modes.
const (
	SenderSettleUnsettled uint8 = 0
	SenderSettleSettled   uint8 = 1
	SenderSettleMixed     uint8 = 2
	ReceiverSettleFirst   uint8 = 0
	ReceiverSettleSecond  uint8 = 1
)

// Attach is the attach performative (transport §2.7.3). Source and Target keep
// their encoded bytes (so a reply can echo them exactly) next to the decoded
// values.
type Attach struct {
	Name                 string
	Handle               uint32
	Role                 Role
	SndSettleMode        *uint8
	RcvSettleMode        *uint8
	Source               *Source
	SourceRaw            []byte
	Target               *Target
	TargetRaw            []byte
	InitialDeliveryCount *uint32
	MaxMessageSize       uint64 // 0 means no limit
	OfferedCapabilities  []Symbol
	DesiredCapabilities  []Symbol
	Properties           Map
}

// Unmarshal decodes an attach frame body.
func (x *Attach) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeAttach, "attach")
	if err != nil {
		return err
	}
	*x = Attach{}
	f.required(f.string(&x.Name, "name"), "name")
	f.required(f.uint(&x.Handle, "handle"), "handle")
	var role bool
	f.required(f.bool(&role, "role"), "role")
	x.Role = Role(role)
	f.optUbyte(&x.SndSettleMode, "snd-settle-mode")
	f.optUbyte(&x.RcvSettleMode, "rcv-settle-mode")
	f.raw(&x.SourceRaw, "source")
	f.raw(&x.TargetRaw, "target")
	f.skip() // unsettled
	f.skip() // incomplete-unsettled
	f.optUint(&x.InitialDeliveryCount, "initial-delivery-count")
	f.ulong(&x.MaxMessageSize, "max-message-size")
	f.symbols(&x.OfferedCapabilities, "offered-capabilities")
	f.symbols(&x.DesiredCapabilities, "desired-capabilities")
	f.fieldsMap(&x.Properties, "properties")
	if f.err != nil {
		return f.err
	}
	if x.SourceRaw != nil {
		x.Source = new(Source)
		if err := x.Source.decode(&Decoder{b: x.SourceRaw}); err != nil {
			return fmt.Errorf("attach.source: %w", err)
		}
	}
	if x.TargetRaw != nil {
		x.Target = new(Target)
		if err := x.Target.decode(&Decoder{b: x.TargetRaw}); err != nil {
			return fmt.Errorf("attach.target: %w", err)
		}
	}
	return nil
}

// Append encodes x. Source and Target are taken from SourceRaw/TargetRaw when
// set, otherwise from the decoded values; nil gives null.
func (x *Attach) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeAttach)
	l.string(x.Name)
	l.uint(x.Handle)
	l.bool(bool(x.Role))
	l.optUbyte(x.SndSettleMode)
	l.optUbyte(x.RcvSettleMode)
	var err error
	switch {
	case x.SourceRaw != nil:
		l.raw(x.SourceRaw)
	case x.Source != nil:
		if l.buf, err = x.Source.Append(l.buf); err != nil {
			return b, err
		}
		l.done()
	default:
		l.null()
	}
	switch {
	case x.TargetRaw != nil:
		l.raw(x.TargetRaw)
	case x.Target != nil:
		l.buf = x.Target.Append(l.buf)
		l.done()
	default:
		l.null()
	}
	l.null() // unsettled
	l.null() // incomplete-unsettled
	l.optUint(x.InitialDeliveryCount)
	if x.MaxMessageSize != 0 {
		l.ulong(x.MaxMessageSize)
	} else {
		l.null()
	}
	l.symbols(x.OfferedCapabilities)
	l.symbols(x.DesiredCapabilities)
	if err := l.optMap(x.Properties); err != nil {
		return b, err
	}
	return l.finish(), nil
}

// Source is the source terminus (messaging §3.5.3). Only the fields the
// emulator uses are kept.
type Source struct {
	Address      string
	Filter       Map
	Capabilities []Symbol
}

func (s *Source) decode(d *Decoder) error {
	f, err := decodeComposite(d, CodeSource, "source")
	if err != nil {
		return err
	}
	f.string(&s.Address, "address")
	f.skip() // durable
	f.skip() // expiry-policy
	f.skip() // timeout
	f.skip() // dynamic
	f.skip() // dynamic-node-properties
	f.skip() // distribution-mode
	f.fieldsMap(&s.Filter, "filter")
	f.skip() // default-outcome
	f.skip() // outcomes
	f.symbols(&s.Capabilities, "capabilities")
	return f.err
}

// Append encodes s.
func (s *Source) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeSource)
	l.optString(s.Address)
	for range 6 {
		l.null()
	}
	if err := l.optMap(s.Filter); err != nil {
		return b, err
	}
	l.null()
	l.null()
	l.symbols(s.Capabilities)
	return l.finish(), nil
}

// Target is the target terminus (messaging §3.5.4). Only the fields the
// emulator uses are kept.
type Target struct {
	Address      string
	Capabilities []Symbol
}

func (t *Target) decode(d *Decoder) error {
	f, err := decodeComposite(d, CodeTarget, "target")
	if err != nil {
		return err
	}
	f.string(&t.Address, "address")
	for range 5 {
		f.skip()
	}
	f.symbols(&t.Capabilities, "capabilities")
	return f.err
}

// Append encodes t.
func (t *Target) Append(b []byte) []byte {
	l := beginFields(b, CodeTarget)
	l.optString(t.Address)
	for range 5 {
		l.null()
	}
	l.symbols(t.Capabilities)
	return l.finish()
}

// Flow is the flow performative (transport §2.7.4).
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
}

// Unmarshal decodes a flow frame body.
func (x *Flow) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeFlow, "flow")
	if err != nil {
		return err
	}
	*x = Flow{}
	f.optUint(&x.NextIncomingID, "next-incoming-id")
	f.required(f.uint(&x.IncomingWindow, "incoming-window"), "incoming-window")
	f.required(f.uint(&x.NextOutgoingID, "next-outgoing-id"), "next-outgoing-id")
	f.required(f.uint(&x.OutgoingWindow, "outgoing-window"), "outgoing-window")
	f.optUint(&x.Handle, "handle")
	f.optUint(&x.DeliveryCount, "delivery-count")
	f.optUint(&x.LinkCredit, "link-credit")
	f.optUint(&x.Available, "available")
	f.bool(&x.Drain, "drain")
	f.bool(&x.Echo, "echo")
	f.skip() // properties
	return f.err
}

// Append encodes x.
func (x *Flow) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeFlow)
	l.optUint(x.NextIncomingID)
	l.uint(x.IncomingWindow)
	l.uint(x.NextOutgoingID)
	l.uint(x.OutgoingWindow)
	l.optUint(x.Handle)
	l.optUint(x.DeliveryCount)
	l.optUint(x.LinkCredit)
	l.optUint(x.Available)
	l.flag(x.Drain)
	l.flag(x.Echo)
	l.null() // properties
	return l.finish(), nil
}

// Transfer is the transfer performative (transport §2.7.5). It uses value
// fields with presence flags so the hot path decodes without allocating.
type Transfer struct {
	Handle           uint32
	DeliveryID       uint32
	HasDeliveryID    bool
	DeliveryTag      []byte // aliases the frame
	MessageFormat    uint32
	HasMessageFormat bool
	Settled          bool
	More             bool
	State            []byte // encoded delivery state, aliasing the frame
	Resume           bool
	Aborted          bool
	Batchable        bool
}

// Unmarshal decodes a transfer frame body, ignoring the payload.
func (x *Transfer) Unmarshal(body []byte) error {
	_, err := x.UnmarshalPayload(body)
	return err
}

// UnmarshalPayload decodes a transfer frame body and returns the payload that
// follows the performative (aliasing body).
func (x *Transfer) UnmarshalPayload(body []byte) ([]byte, error) {
	d := Decoder{b: body}
	f, err := decodeComposite(&d, CodeTransfer, "transfer")
	if err != nil {
		return nil, err
	}
	*x = Transfer{}
	f.required(f.uint(&x.Handle, "handle"), "handle")
	x.HasDeliveryID = f.uint(&x.DeliveryID, "delivery-id")
	f.binary(&x.DeliveryTag, "delivery-tag")
	x.HasMessageFormat = f.uint(&x.MessageFormat, "message-format")
	f.bool(&x.Settled, "settled")
	f.bool(&x.More, "more")
	f.skip() // rcv-settle-mode
	f.raw(&x.State, "state")
	f.bool(&x.Resume, "resume")
	f.bool(&x.Aborted, "aborted")
	f.bool(&x.Batchable, "batchable")
	if f.err != nil {
		return nil, f.err
	}
	if len(x.DeliveryTag) > 32 {
		return nil, malformed("transfer: delivery-tag of %d bytes", len(x.DeliveryTag))
	}
	return d.b, nil
}

// Append encodes x (the payload is appended separately).
func (x *Transfer) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeTransfer)
	l.uint(x.Handle)
	if x.HasDeliveryID {
		l.uint(x.DeliveryID)
	} else {
		l.null()
	}
	if x.DeliveryTag != nil {
		l.binary(x.DeliveryTag)
	} else {
		l.null()
	}
	if x.HasMessageFormat {
		l.uint(x.MessageFormat)
	} else {
		l.null()
	}
	l.flag(x.Settled)
	l.flag(x.More)
	l.null()
	l.optRaw(x.State)
	l.flag(x.Resume)
	l.flag(x.Aborted)
	l.flag(x.Batchable)
	return l.finish(), nil
}

// Disposition is the disposition performative (transport §2.7.6).
type Disposition struct {
	Role      Role
	First     uint32
	Last      *uint32
	Settled   bool
	State     []byte // encoded delivery state, e.g. from AppendAccepted
	Batchable bool
}

// Unmarshal decodes a disposition frame body.
func (x *Disposition) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeDisposition, "disposition")
	if err != nil {
		return err
	}
	*x = Disposition{}
	var role bool
	f.required(f.bool(&role, "role"), "role")
	x.Role = Role(role)
	f.required(f.uint(&x.First, "first"), "first")
	f.optUint(&x.Last, "last")
	f.bool(&x.Settled, "settled")
	f.raw(&x.State, "state")
	f.bool(&x.Batchable, "batchable")
	return f.err
}

// Append encodes x.
func (x *Disposition) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeDisposition)
	l.bool(bool(x.Role))
	l.uint(x.First)
	l.optUint(x.Last)
	l.flag(x.Settled)
	l.optRaw(x.State)
	l.flag(x.Batchable)
	return l.finish(), nil
}

// Detach is the detach performative (transport §2.7.7).
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

// Unmarshal decodes a detach frame body.
func (x *Detach) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeDetach, "detach")
	if err != nil {
		return err
	}
	*x = Detach{}
	f.required(f.uint(&x.Handle, "handle"), "handle")
	f.bool(&x.Closed, "closed")
	f.errorField(&x.Error, "error")
	return f.err
}

// Append encodes x.
func (x *Detach) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeDetach)
	l.uint(x.Handle)
	l.flag(x.Closed)
	if x.Error != nil {
		var err error
		if l.buf, err = x.Error.Append(l.buf); err != nil {
			return b, err
		}
		l.done()
	} else {
		l.null()
	}
	return l.finish(), nil
}

// End is the end performative (transport §2.7.8).
type End struct {
	Error *Error
}

// Unmarshal decodes an end frame body.
func (x *End) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeEnd, "end")
	if err != nil {
		return err
	}
	*x = End{}
	f.errorField(&x.Error, "error")
	return f.err
}

// Append encodes x.
func (x *End) Append(b []byte) ([]byte, error) {
	return appendErrorOnly(b, CodeEnd, x.Error)
}

// Close is the close performative (transport §2.7.9).
type Close struct {
	Error *Error
}

// Unmarshal decodes a close frame body.
func (x *Close) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeClose, "close")
	if err != nil {
		return err
	}
	*x = Close{}
	f.errorField(&x.Error, "error")
	return f.err
}

// Append encodes x.
func (x *Close) Append(b []byte) ([]byte, error) {
	return appendErrorOnly(b, CodeClose, x.Error)
}

func appendErrorOnly(b []byte, code uint64, e *Error) ([]byte, error) {
	l := beginFields(b, code)
	if e != nil {
		var err error
		if l.buf, err = e.Append(l.buf); err != nil {
			return b, err
		}
		l.done()
	} else {
		l.null()
	}
	return l.finish(), nil
}

// Error is the AMQP error type (transport §2.8.14).
type Error struct {
	Condition   Symbol
	Description string
	Info        Map
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return fmt.Sprintf("%s: %s", e.Condition, e.Description)
}

func (e *Error) decode(d *Decoder) error {
	f, err := decodeComposite(d, CodeError, "error")
	if err != nil {
		return err
	}
	f.required(f.symbol(&e.Condition, "condition"), "condition")
	f.string(&e.Description, "description")
	f.fieldsMap(&e.Info, "info")
	return f.err
}

// Append encodes e.
func (e *Error) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeError)
	l.symbol(e.Condition)
	l.optString(e.Description)
	if err := l.optMap(e.Info); err != nil {
		return b, err
	}
	return l.finish(), nil
}

// AppendAccepted appends the accepted outcome (00 53 24 45).
func AppendAccepted(b []byte) []byte {
	l := beginFields(b, CodeAccepted)
	return l.finish()
}

// AppendRejected appends the rejected outcome carrying e.
func AppendRejected(b []byte, e *Error) ([]byte, error) {
	return appendErrorOnly(b, CodeRejected, e)
}

// DeliveryStateCode returns the descriptor code of an encoded delivery state
// (e.g. CodeAccepted), or 0 if state is empty or not a described type.
func DeliveryStateCode(state []byte) uint64 {
	if len(state) == 0 {
		return 0
	}
	d := Decoder{b: state}
	code, _, err := d.ReadDescriptor()
	if err != nil {
		return 0
	}
	return code
}

// DecodeRejected returns the error of an encoded rejected outcome, or nil.
func DecodeRejected(state []byte) (*Error, error) {
	f, err := decodeBody(state, CodeRejected, "rejected")
	if err != nil {
		return nil, err
	}
	var e *Error
	f.errorField(&e, "error")
	return e, f.err
}

// SASLMechanisms is the sasl-mechanisms frame body (security §5.3.3.1).
type SASLMechanisms struct {
	Mechanisms []Symbol
}

// Unmarshal decodes a sasl-mechanisms frame body.
func (x *SASLMechanisms) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeSASLMechanisms, "sasl-mechanisms")
	if err != nil {
		return err
	}
	f.symbols(&x.Mechanisms, "sasl-server-mechanisms")
	return f.err
}

// Append encodes x, the mechanisms as an array of symbols.
func (x *SASLMechanisms) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeSASLMechanisms)
	l.symbols(x.Mechanisms)
	return l.finish(), nil
}

// SASLInit is the sasl-init frame body (security §5.3.3.2).
type SASLInit struct {
	Mechanism       Symbol
	InitialResponse []byte
	Hostname        string
}

// Unmarshal decodes a sasl-init frame body.
func (x *SASLInit) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeSASLInit, "sasl-init")
	if err != nil {
		return err
	}
	*x = SASLInit{}
	f.required(f.symbol(&x.Mechanism, "mechanism"), "mechanism")
	f.binary(&x.InitialResponse, "initial-response")
	f.string(&x.Hostname, "hostname")
	return f.err
}

// Append encodes x.
func (x *SASLInit) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeSASLInit)
	l.symbol(x.Mechanism)
	if x.InitialResponse != nil {
		l.binary(x.InitialResponse)
	} else {
		l.null()
	}
	l.optString(x.Hostname)
	return l.finish(), nil
}

// SASL outcome codes (security §5.3.3.6).
const (
	SASLCodeOK      uint8 = 0
	SASLCodeAuth    uint8 = 1
	SASLCodeSys     uint8 = 2
	SASLCodeSysPerm uint8 = 3
	SASLCodeSysTemp uint8 = 4
)

// SASLOutcome is the sasl-outcome frame body (security §5.3.3.6).
type SASLOutcome struct {
	Code           uint8
	AdditionalData []byte
}

// Unmarshal decodes a sasl-outcome frame body.
func (x *SASLOutcome) Unmarshal(body []byte) error {
	f, err := decodeBody(body, CodeSASLOutcome, "sasl-outcome")
	if err != nil {
		return err
	}
	*x = SASLOutcome{}
	f.required(f.ubyte(&x.Code, "code"), "code")
	f.binary(&x.AdditionalData, "additional-data")
	return f.err
}

// Append encodes x, the code as a ubyte.
func (x *SASLOutcome) Append(b []byte) ([]byte, error) {
	l := beginFields(b, CodeSASLOutcome)
	l.ubyte(x.Code)
	if x.AdditionalData != nil {
		l.binary(x.AdditionalData)
	} else {
		l.null()
	}
	return l.finish(), nil
}
