package emulator

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A partition's log file in the data directory: a header, then one record
// per event, appended (and written to the OS) before the producer's delivery
// is acknowledged.
//
//	header: "EHEMLOG1" | next sequence number (int64) | next offset (int64)
//	record: total length (uint32, of the rest) | seq (int64) | offset (int64) |
//	        enqueued ms (int64) | maStart (int32) | maEnd (int32) |
//	        key length (uint16) | key | message
//
// A torn record at the end (the process was killed mid-write) is cut off on
// load.
const (
	logMagic        = "EHEMLOG1"
	logHeaderSize   = len(logMagic) + 16
	logRecordFixed  = 8 + 8 + 8 + 4 + 4 + 2
	maxLogRecordLen = 64 << 20
)

// partitionLog appends a partition's events to its file.
type partitionLog struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
	err error // the first write error; the log takes no more events
}

// logPath is the file of one partition: DIR/<escaped lower-case hub>/<id>.log.
func logPath(dir, hubName string, id int) string {
	return filepath.Join(dir, url.PathEscape(strings.ToLower(hubName)), strconv.Itoa(id)+".log")
}

// openLog loads the partition's events from its log file (creating the file
// if needed), drops those past retention, and opens the file for appending.
// It runs before the server accepts connections.
func (p *partition) openLog(path string, nowMs int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	good, err := p.loadLog(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p.trimLocked(nowMs)
	p.trimBytesLocked()
	if good != len(data) || p.head > 0 || len(data) == 0 {
		// Rewrite: a new file, a torn tail cut off, or expired events to drop.
		if err := p.rewriteLog(path); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	p.log = &partitionLog{f: f, w: bufio.NewWriterSize(f, 256<<10)}
	return nil
}

// loadLog reads a log into the partition and returns how many bytes of it
// are whole records.
func (p *partition) loadLog(data []byte) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	if len(data) < logHeaderSize || string(data[:len(logMagic)]) != logMagic {
		return 0, errors.New("not an emulator partition log (bad header)")
	}
	p.nextSeq = int64(binary.BigEndian.Uint64(data[8:]))
	p.nextOffset = int64(binary.BigEndian.Uint64(data[16:]))
	pos := logHeaderSize
	for pos+4 <= len(data) {
		n := int(binary.BigEndian.Uint32(data[pos:]))
		if n < logRecordFixed || n > maxLogRecordLen || pos+4+n > len(data) {
			break
		}
		r := data[pos+4 : pos+4+n]
		keyLen := int(binary.BigEndian.Uint16(r[32:]))
		if logRecordFixed+keyLen > n {
			break
		}
		rec := record{
			seq:      int64(binary.BigEndian.Uint64(r[0:])),
			offset:   int64(binary.BigEndian.Uint64(r[8:])),
			enqueued: int64(binary.BigEndian.Uint64(r[16:])),
			maStart:  int32(binary.BigEndian.Uint32(r[24:])),
			maEnd:    int32(binary.BigEndian.Uint32(r[28:])),
			key:      string(r[logRecordFixed : logRecordFixed+keyLen]),
			msg:      r[logRecordFixed+keyLen:],
		}
		if rec.maStart < 0 || rec.maEnd < rec.maStart || int(rec.maEnd) > len(rec.msg) {
			break
		}
		p.events = append(p.events, rec)
		p.lastSeq, p.lastOff, p.lastEnqueued = rec.seq, rec.offset, rec.enqueued
		p.nextSeq, p.nextOffset = rec.seq+1, rec.offset+int64(len(rec.msg))
		p.retainedBytes += int64(len(rec.msg))
		p.storedEvents++
		p.storedBytes += int64(len(rec.msg))
		pos += 4 + n
	}
	return pos, nil
}

// rewriteLog writes the retained events to a new file that replaces path.
func (p *partition) rewriteLog(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	w := bufio.NewWriter(f)
	begin, beginOff := p.nextSeq, p.nextOffset
	if p.head < len(p.events) {
		begin, beginOff = p.events[p.head].seq, p.events[p.head].offset
	}
	hdr := append([]byte(logMagic), make([]byte, 16)...)
	binary.BigEndian.PutUint64(hdr[8:], uint64(begin))
	binary.BigEndian.PutUint64(hdr[16:], uint64(beginOff))
	w.Write(hdr)
	var buf []byte
	for _, r := range p.events[p.head:] {
		buf = appendLogRecord(buf[:0], &r)
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

func appendLogRecord(b []byte, r *record) []byte {
	n := logRecordFixed + len(r.key) + len(r.msg)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint64(b, uint64(r.seq))
	b = binary.BigEndian.AppendUint64(b, uint64(r.offset))
	b = binary.BigEndian.AppendUint64(b, uint64(r.enqueued))
	b = binary.BigEndian.AppendUint32(b, uint32(r.maStart))
	b = binary.BigEndian.AppendUint32(b, uint32(r.maEnd))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.key)))
	b = append(b, r.key...)
	return append(b, r.msg...)
}

// write appends records to the log and hands them to the OS (no fsync: an
// acknowledged event survives the emulator process, not the machine).
func (l *partitionLog) write(recs []record) error {
	if l.err != nil {
		return l.err
	}
	if len(recs) > 0 && len(recs[0].key) > 1<<16-1 {
		return fmt.Errorf("partition key of %d bytes is too long for the data directory's log", len(recs[0].key))
	}
	for i := range recs {
		l.buf = appendLogRecord(l.buf[:0], &recs[i])
		if _, err := l.w.Write(l.buf); err != nil {
			l.err = err
			return err
		}
	}
	if err := l.w.Flush(); err != nil {
		// The file may now end in a torn record: refuse every later event
		// rather than append after it.
		l.err = err
		return err
	}
	return nil
}

func (l *partitionLog) close() error {
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// closeLogs flushes and closes every partition log.
func (srv *Server) closeLogs() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var errs []error
	for _, h := range srv.hubs {
		for _, p := range h.partitions {
			p.mu.Lock()
			if p.log != nil {
				errs = append(errs, p.log.close())
				p.log = nil
			}
			p.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}
