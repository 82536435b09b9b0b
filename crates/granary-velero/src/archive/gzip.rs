//! The tarball's gzip layer (docs/formats.md#backup-tarball).
//!
//! Granary writes the gzip stream as a series of members of at most [`MEMBER_BYTES`]
//! uncompressed bytes each, every member carrying its own compressed length in an extra
//! field (subfield `GR`). A gzip stream of several members is one gzip stream (RFC 1952
//! section 2.2): Go's `gzip.Reader` (Velero), `gzip -d`, `tar xzf` and Python's `gzip`
//! read it whole and skip the extra field. BGZF, the bioinformatics format, does the same
//! with 64 KiB blocks.
//!
//! The length lets a reader cut the stream into members without inflating it, so
//! [`with_inflated`] inflates members on several threads while its caller parses the
//! tar stream, in order. A stream without the field (Velero's own tarballs) is inflated
//! on one thread beside the caller. Either way the caller sees exactly the bytes a
//! sequential gzip reader would: a member must end exactly where its length says, and
//! its CRC-32 and size are checked.
//!
//! flate2's `GzBuilder` writes the header before the data, when the member's length is
//! not known yet; so the framing (header, CRC-32, size) is written here around flate2's
//! raw deflate.

use std::io::{self, Cursor, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::DeflateEncoder;

/// Uncompressed bytes per member Granary writes.
pub const MEMBER_BYTES: usize = 1 << 20;
/// The most a member marked with its length may inflate to; more is refused, so a
/// marked member never costs a worker more memory than this.
pub const MAX_MEMBER_BYTES: usize = 4 << 20;
/// Chunks a stream without lengths is handed over in.
const CHUNK_BYTES: usize = 256 << 10;

/// Header of a member Granary writes: the fixed gzip header with only `FEXTRA` set,
/// `XLEN` 12, subfield `GR` of 8 bytes holding the member's total length (header,
/// deflate data and trailer) little-endian.
const HEADER_BYTES: usize = 24;
const FEXTRA: u8 = 0x04;
const OS_UNKNOWN: u8 = 255;
const TRAILER_BYTES: usize = 8;

fn header(total: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..10].copy_from_slice(&[0x1f, 0x8b, 8, FEXTRA, 0, 0, 0, 0, 0, OS_UNKNOWN]);
    h[10..12].copy_from_slice(&12u16.to_le_bytes());
    h[12..16].copy_from_slice(&[b'G', b'R', 8, 0]);
    h[16..].copy_from_slice(&total.to_le_bytes());
    h
}

/// The member length in `h`, when `h` is a header as Granary writes it.
fn marked_length(h: &[u8; HEADER_BYTES]) -> Option<u64> {
    let ours = h[..4] == [0x1f, 0x8b, 8, FEXTRA]
        && h[10..12] == 12u16.to_le_bytes()
        && h[12..16] == [b'G', b'R', 8, 0];
    ours.then(|| u64::from_le_bytes(h[16..].try_into().unwrap_or_default()))
}

/// One member holding `data`.
fn member(data: &[u8], level: Compression) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(HEADER_BYTES + data.len() / 2);
    out.extend_from_slice(&header(0));
    let mut deflate = DeflateEncoder::new(out, level);
    deflate.write_all(data)?;
    let mut out = deflate.finish()?;
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the size modulo 2^32 (RFC 1952); members are far smaller.
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let total = out.len() as u64;
    out[..HEADER_BYTES].copy_from_slice(&header(total));
    Ok(out)
}

/// A gzip writer that cuts its stream into members of [`MEMBER_BYTES`], each marked
/// with its length. Holds one member's data and its compressed form at most.
pub struct MemberWriter<W: Write> {
    out: W,
    pending: Vec<u8>,
    level: Compression,
}

impl<W: Write> MemberWriter<W> {
    pub fn new(out: W, level: Compression) -> Self {
        Self {
            out,
            pending: Vec::with_capacity(MEMBER_BYTES),
            level,
        }
    }

    fn write_member(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let m = member(&self.pending, self.level)?;
            self.out.write_all(&m)?;
            self.pending.clear();
        }
        Ok(())
    }

    /// Writes the last member and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_member()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for MemberWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(MEMBER_BYTES - self.pending.len());
        self.pending.extend_from_slice(&data[..n]);
        if self.pending.len() == MEMBER_BYTES {
            self.write_member()?;
        }
        Ok(n)
    }

    /// Flushes the output only: a member ends when it is full or at [`finish`].
    ///
    /// [`finish`]: MemberWriter::finish
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// How many threads inflate marked members at once.
fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
}

type Inflated = io::Result<Vec<u8>>;
type Job = (Vec<u8>, SyncSender<Inflated>);

/// Runs `consume` with a reader of the inflated `input`, inflating on other threads
/// (see the module documentation). At most about `2 × workers + 2` members (or chunks)
/// are held at once, whatever the stream; `consume` bounds the total it reads.
pub fn with_inflated<R, T>(input: R, consume: impl FnOnce(&mut InflatedReader) -> T) -> T
where
    R: Read + Send,
{
    let workers = workers();
    // In archive order: one receiver per member, answered by whichever worker takes it.
    let (ordered_tx, ordered_rx) = sync_channel::<Receiver<Inflated>>(workers + 1);
    let (job_tx, job_rx) = sync_channel::<Job>(workers);
    let job_rx = Arc::new(Mutex::new(job_rx));
    std::thread::scope(|s| {
        for _ in 0..workers {
            let jobs = Arc::clone(&job_rx);
            s.spawn(move || {
                loop {
                    let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((bytes, done)) = job else { return };
                    // The reader may be gone; then nobody waits for this member.
                    let _ = done.send(inflate_member(&bytes));
                }
            });
        }
        s.spawn(move || split(input, &job_tx, &ordered_tx));
        let mut reader = InflatedReader {
            ordered: ordered_rx,
            current: Vec::new(),
            at: 0,
            ended: false,
        };
        let out = consume(&mut reader);
        // Stops the splitter and, once the queue drains, the workers.
        drop(reader);
        out
    })
}

/// Cuts `input` into marked members for the workers; from the first unmarked header
/// on, inflates the rest itself, in chunks. Ends when the input ends, on the first
/// error (handed on in order), or when the reader is gone.
fn split<R: Read>(mut input: R, jobs: &SyncSender<Job>, ordered: &SyncSender<Receiver<Inflated>>) {
    let ready = |result: Inflated| -> bool {
        let (tx, rx) = sync_channel(1);
        let _ = tx.send(result);
        ordered.send(rx).is_ok()
    };
    let mut members = 0u64;
    loop {
        let mut head = [0u8; HEADER_BYTES];
        let n = match read_up_to(&mut input, &mut head) {
            Ok(n) => n,
            Err(e) => {
                ready(Err(e));
                return;
            }
        };
        if n == 0 && members > 0 {
            return;
        }
        let length = if n == HEADER_BYTES {
            marked_length(&head)
        } else {
            None
        };
        let Some(length) = length else {
            // Not a member as Granary writes them: a sequential reader from here on.
            let rest = Cursor::new(head[..n].to_vec()).chain(input);
            let mut gz = MultiGzDecoder::new(rest);
            loop {
                let mut chunk = Vec::with_capacity(CHUNK_BYTES);
                match (&mut gz).take(CHUNK_BYTES as u64).read_to_end(&mut chunk) {
                    Ok(0) => return,
                    Ok(_) => {
                        if !ready(Ok(chunk)) {
                            return;
                        }
                    }
                    Err(e) => {
                        ready(Err(e));
                        return;
                    }
                }
            }
        };
        let max_compressed = (MAX_MEMBER_BYTES + MAX_MEMBER_BYTES / 64 + 1024) as u64;
        if length < (HEADER_BYTES + TRAILER_BYTES) as u64 || length > max_compressed {
            ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("gzip member claims {length} bytes, outside what a member may hold"),
            )));
            return;
        }
        let mut bytes = Vec::with_capacity(length as usize);
        bytes.extend_from_slice(&head);
        match (&mut input)
            .take(length - HEADER_BYTES as u64)
            .read_to_end(&mut bytes)
        {
            Ok(_) if bytes.len() as u64 == length => {}
            Ok(_) => {
                ready(Err(io::ErrorKind::UnexpectedEof.into()));
                return;
            }
            Err(e) => {
                ready(Err(e));
                return;
            }
        }
        members += 1;
        let (done, answer) = sync_channel(1);
        if ordered.send(answer).is_err() || jobs.send((bytes, done)).is_err() {
            return;
        }
    }
}

/// Reads until `buf` is full or the input ends; the count read.
fn read_up_to<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Inflates one marked member: exactly one gzip member, ending exactly at the end of
/// `bytes`, its CRC-32 and size right, at most [`MAX_MEMBER_BYTES`] inflated.
fn inflate_member(bytes: &[u8]) -> Inflated {
    let mut gz = flate2::bufread::GzDecoder::new(bytes);
    let mut out = Vec::with_capacity(MEMBER_BYTES);
    (&mut gz)
        .take(MAX_MEMBER_BYTES as u64 + 1)
        .read_to_end(&mut out)?;
    if out.len() > MAX_MEMBER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a gzip member inflates to more than {MAX_MEMBER_BYTES} bytes"),
        ));
    }
    if !gz.into_inner().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a gzip member ends before the length in its header",
        ));
    }
    Ok(out)
}

/// The inflated stream, in order; see [`with_inflated`].
pub struct InflatedReader {
    ordered: Receiver<Receiver<Inflated>>,
    current: Vec<u8>,
    at: usize,
    ended: bool,
}

impl Read for InflatedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.at < self.current.len() {
                let n = buf.len().min(self.current.len() - self.at);
                buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if self.ended {
                return Ok(0);
            }
            let next = match self.ordered.recv() {
                // The splitter is done and every member was read.
                Err(_) => {
                    self.ended = true;
                    return Ok(0);
                }
                Ok(answer) => answer.recv(),
            };
            match next {
                Ok(Ok(chunk)) => {
                    self.current = chunk;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    self.current.clear();
                    return Err(e);
                }
                Err(_) => {
                    self.ended = true;
                    return Err(io::Error::other("a gzip worker stopped"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(data: &[u8]) -> Vec<u8> {
        let mut w = MemberWriter::new(Vec::new(), Compression::default());
        // Odd-sized writes, as tar makes them.
        for part in data.chunks(7919) {
            w.write_all(part).expect("writes");
        }
        w.finish().expect("finishes")
    }

    fn read_all(gz: &[u8]) -> io::Result<Vec<u8>> {
        with_inflated(gz, |r| {
            let mut out = Vec::new();
            r.read_to_end(&mut out).map(|_| out)
        })
    }

    fn sample(len: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Half text, half noise: compresses some.
                if i % 2 == 0 {
                    b'a' + (x % 4) as u8
                } else {
                    x as u8
                }
            })
            .collect()
    }

    /// Member offsets of a stream Granary wrote, from the lengths in the headers.
    fn members(gz: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < gz.len() {
            let head: [u8; HEADER_BYTES] = gz[at..at + HEADER_BYTES].try_into().expect("header");
            let len = marked_length(&head).expect("marked") as usize;
            out.push((at, len));
            at += len;
        }
        out
    }

    #[test]
    fn members_read_back_in_order_and_as_one_gzip_stream() {
        let data = sample(3 * MEMBER_BYTES + 12_345);
        let gz = written(&data);
        assert_eq!(members(&gz).len(), 4);
        assert_eq!(read_all(&gz).expect("reads"), data);
        // Any gzip reader reads the members as one stream.
        let mut plain = Vec::new();
        MultiGzDecoder::new(&gz[..])
            .read_to_end(&mut plain)
            .expect("a sequential reader reads it");
        assert_eq!(plain, data);
        // And a plain gzip stream reads through the sequential path.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&data).expect("writes");
        assert_eq!(read_all(&enc.finish().expect("gz")).expect("reads"), data);
        // Marked members followed by a plain one, as a sequential reader sees them.
        let mut mixed = written(&data[..MEMBER_BYTES + 10]);
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&data[MEMBER_BYTES + 10..]).expect("writes");
        mixed.extend(enc.finish().expect("gz"));
        assert_eq!(read_all(&mixed).expect("reads"), data);
    }

    #[test]
    fn a_member_not_where_its_length_says_is_refused() {
        let data = sample(2 * MEMBER_BYTES);
        let gz = written(&data);
        let m = members(&gz);
        let (second, len) = m[1];
        let refused = |gz: &[u8]| read_all(gz).expect_err("refused");

        // A length one short: the member runs past it.
        let mut short = gz.clone();
        short[16..24].copy_from_slice(&(m[0].1 as u64 - 1).to_le_bytes());
        let e = refused(&short);
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::InvalidInput
                    | io::ErrorKind::InvalidData
            ),
            "{e}"
        );
        // A length one long: a byte of the next member would be skipped.
        let mut long = gz.clone();
        long[16..24].copy_from_slice(&(m[0].1 as u64 + 1).to_le_bytes());
        assert!(
            refused(&long)
                .to_string()
                .contains("ends before the length")
        );
        // A changed byte inside the deflate data, or the CRC.
        let mut flipped = gz.clone();
        flipped[second + len - 6] ^= 1;
        refused(&flipped);
        // Cut inside the last member.
        let e = refused(&gz[..gz.len() - 3]);
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        // A length no member may have.
        let mut huge = gz.clone();
        huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(
            refused(&huge)
                .to_string()
                .contains("outside what a member may hold")
        );
    }

    #[test]
    fn a_marked_member_may_not_inflate_past_the_limit() {
        // A bomb in one marked member: 4 MiB and a byte of zeros compress to a few KiB.
        let m = member(&vec![0u8; MAX_MEMBER_BYTES + 1], Compression::default()).expect("member");
        assert!(m.len() < 64 << 10);
        let e = read_all(&m).expect_err("refused");
        assert!(e.to_string().contains("inflates to more than"), "{e}");
    }

    #[test]
    fn a_reader_that_stops_early_stops_the_threads() {
        let gz = written(&sample(8 * MEMBER_BYTES));
        let first = with_inflated(&gz[..], |r| {
            let mut b = [0u8; 10];
            r.read_exact(&mut b).map(|_| b)
        })
        .expect("reads");
        assert_eq!(&first[..], &sample(10)[..]);
    }
}
