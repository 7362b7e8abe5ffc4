//! Fuzzing the WebSocket handshake and frame parsers with proptest, and replaying the
//! corpus of cases kept in `tests/corpus/ws/` (hand-written from RFC 6455 plus anything
//! the fuzzer found). Corpus file names carry the expected outcome:
//! `NAME.ok.bin` / `NAME.1002.bin` / `NAME.more.bin` (a frame stream as a server receives
//! it, max message 1,024 bytes) and `NAME.101.http` / `NAME.400.http` / `NAME.more.http`
//! (an upgrade request).
#![allow(clippy::unwrap_used)] // panics are the assertions

use crate::workload_util;

use std::path::Path;

use c1m::workload::{
    engine::server::proto::{WsState, ws_input},
    stats::counters::Counters,
    ws::{
        Decoder, Opcode, Role,
        decoder::{OwnedEvent, decode_stream},
        frame::{apply_mask, decode_header, encode_frame, encode_header},
        handshake::{self, parse_request, parse_response},
    },
};
use proptest::prelude::*;

const MAX: u64 = 1024;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/ws");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// "ok", "more", or the close code / HTTP status.
fn frame_outcome(stream: &[u8], chunks: &[usize]) -> String {
    let dec = Decoder::new(Role::Server, MAX);
    let (events, err) = decode_stream(&dec, stream, chunks);
    if let Some(e) = err {
        return e.close_code().to_string();
    }
    // Whole stream consumed into events? Re-decode to see if a tail is left.
    let consumed_all = {
        let mut buf = stream.to_vec();
        let mut frag = None;
        let mut off = 0;
        let mut closed = false;
        while let Ok(Some((n, ev))) = dec.decode(&mut buf[off..], &mut frag) {
            off += n;
            if matches!(ev, Some(c1m::workload::ws::Event::Close(_))) {
                closed = true;
                break;
            }
        }
        closed || (off == stream.len() && frag.is_none())
    };
    let _ = events;
    if consumed_all {
        "ok".into()
    } else {
        "more".into()
    }
}

fn handshake_outcome(req: &[u8]) -> String {
    match parse_request(req) {
        Ok(Some(_)) => "101".into(),
        Ok(None) => "more".into(),
        Err(e) => e.status().to_string(),
    }
}

#[test]
fn corpus_replays_with_expected_outcomes() {
    let cases = corpus();
    assert!(
        cases.len() >= 40,
        "corpus went missing: {} files",
        cases.len()
    );
    for (name, bytes) in cases {
        let mut parts = name.rsplitn(3, '.');
        let (ext, want) = (parts.next().unwrap(), parts.next().unwrap());
        match ext {
            "bin" => {
                for chunks in [&[usize::MAX][..], &[1], &[3, 1, 7]] {
                    assert_eq!(
                        frame_outcome(&bytes, chunks),
                        want,
                        "{name} in chunks {chunks:?}"
                    );
                }
                // The engine's own input path answers the same way and never panics.
                let dec = Decoder::new(Role::Server, MAX);
                let (mut st, mut frag, mut out, mut c) =
                    (WsState::Open, None, Vec::new(), Counters::default());
                let mut data = bytes.clone();
                ws_input(&dec, &mut st, &mut data, &mut frag, &mut out, &mut c);
                if want.parse::<u16>().is_ok() {
                    assert_eq!(out[out.len() - 4..out.len() - 2], [0x88, 0x02], "{name}");
                    assert_eq!(
                        u16::from_be_bytes([out[out.len() - 2], out[out.len() - 1]]).to_string(),
                        want
                    );
                }
            }
            "http" => assert_eq!(handshake_outcome(&bytes), want, "{name}"),
            other => panic!("corpus file {name} has unknown type {other}"),
        }
    }
}

fn masked_stream(frames: &[(u8, Vec<u8>, bool)], key: [u8; 4]) -> Vec<u8> {
    let mut s = Vec::new();
    for (op, payload, fin) in frames {
        let op = Opcode::from_u8(*op).unwrap();
        encode_header(&mut s, *fin, op, Some(key), payload.len() as u64);
        let at = s.len();
        s.extend_from_slice(payload);
        apply_mask(&mut s[at..], key, 0);
    }
    s
}

proptest! {
    // 2,000 cases per property keeps `cargo test` fast; PROPTEST_CASES=200000 for a long run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn handshake_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(Some((_, n))) = parse_request(&bytes) {
            prop_assert!(n <= bytes.len());
        }
        if let Ok(Some(n)) = parse_response(&bytes, &rfc_key()) {
            prop_assert!(n <= bytes.len());
        }
    }

    #[test]
    fn mutated_requests_never_panic(
        cut in 0usize..200,
        flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..6),
    ) {
        let mut req = handshake::request("h", "/", &rfc_key());
        for (at, b) in flips {
            let i = at % req.len();
            req[i] = b;
        }
        req.truncate(req.len().saturating_sub(cut % 8));
        let _ = parse_request(&req);
        let mut resp = handshake::response_accept("dGhlIHNhbXBsZSBub25jZQ==");
        let i = cut % resp.len();
        resp[i] ^= 0x20;
        let _ = parse_response(&resp, &rfc_key());
    }

    /// Arbitrary bytes: no panic, and the same outcome however reads cut the stream.
    #[test]
    fn decoder_is_total_and_split_invariant(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        chunks in proptest::collection::vec(1usize..50, 1..8),
        server in any::<bool>(),
    ) {
        let dec = Decoder::new(if server { Role::Server } else { Role::Client }, MAX);
        let whole = decode_stream(&dec, &bytes, &[usize::MAX]);
        let split = decode_stream(&dec, &bytes, &chunks);
        prop_assert_eq!(whole, split);
        let _ = decode_header(&bytes, Role::Server, MAX);
    }

    /// Valid frame sequences (data split into fragments, control frames between) decode
    /// back to the messages that were sent.
    #[test]
    fn encoded_messages_decode_back(
        msgs in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300), 1usize..4), 1..6),
        key in any::<[u8; 4]>(),
        chunks in proptest::collection::vec(1usize..64, 1..5),
    ) {
        let mut frames = Vec::new();
        let mut want = Vec::new();
        for (binary, payload, parts) in msgs {
            let payload = if binary { payload } else { String::from_utf8_lossy(&payload).into_owned().into_bytes() };
            if payload.len() as u64 > MAX { continue; }
            // Split on char boundaries is not needed: UTF-8 is checked on the whole message.
            let per = payload.len().div_ceil(parts).max(1);
            let pieces: Vec<&[u8]> = if payload.is_empty() { vec![&[][..]] } else { payload.chunks(per).collect() };
            let pieces_len = pieces.len();
            for (i, p) in pieces.iter().enumerate() {
                let op = if i == 0 { if binary { 2 } else { 1 } } else { 0 };
                frames.push((op, p.to_vec(), i + 1 == pieces.len()));
                if i == 0 { frames.push((9, b"ping".to_vec(), true)); }
            }
            // The ping follows the first frame: before the message if that frame was not final.
            let msg = OwnedEvent::Message { text: !binary, payload };
            let ping = OwnedEvent::Ping(b"ping".to_vec());
            if pieces_len > 1 { want.extend([ping, msg]); } else { want.extend([msg, ping]); }
        }
        let stream = masked_stream(&frames, key);
        let (events, err) = decode_stream(&Decoder::new(Role::Server, MAX), &stream, &chunks);
        prop_assert_eq!(err, None);
        prop_assert_eq!(events, want);
    }

    /// The server's input path on arbitrary bytes after the handshake: no panic, and what
    /// it writes back is itself valid server framing.
    #[test]
    fn server_answers_are_valid_frames(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let dec = Decoder::new(Role::Server, MAX);
        let (mut st, mut frag, mut out, mut c) = (WsState::Open, None, Vec::new(), Counters::default());
        let mut data = bytes.clone();
        ws_input(&dec, &mut st, &mut data, &mut frag, &mut out, &mut c);
        let (_, err) = decode_stream(&Decoder::new(Role::Client, u64::MAX >> 1), &out, &[usize::MAX]);
        prop_assert_eq!(err, None);
        let mut echo = Vec::new();
        encode_frame(&mut echo, Opcode::Binary, &bytes, None);
        prop_assert!(decode_header(&echo, Role::Client, u64::MAX >> 1).unwrap().is_some());
    }
}

/// The corpus over real sockets, against each engine's server: every case whose outcome is
/// a close code or an HTTP status gets exactly that answer on the wire. (The cases that
/// wait for more bytes would only show the handshake timeout.)
#[test]
fn corpus_over_sockets_gets_the_same_answers_from_each_engine() {
    use std::{
        io::{Read, Write},
        net::TcpStream,
        time::Duration,
    };
    let (port, ctl) = (20350u16, "127.0.0.1:20950");
    let cases = corpus();
    workload_util::each_engine(|_| {
        let _server = workload_util::ws_server(port, ctl, &["--max-message", &MAX.to_string()]);
        let mut checked = 0;
        for (name, bytes) in &cases {
            let mut parts = name.rsplitn(3, '.');
            let (ext, want) = (parts.next().unwrap(), parts.next().unwrap());
            if want == "more" || want == "ok" {
                continue;
            }
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            if ext == "bin" {
                s.write_all(&handshake::request("h", "/", &rfc_key()))
                    .unwrap();
            }
            s.write_all(bytes).unwrap();
            // Until the answer is complete: a server may rightly hold the connection open
            // after its close frame, waiting for ours (RFC 6455 §7.1.1).
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !answered(ext, &got) {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let answer = match ext {
                "http" => String::from_utf8_lossy(&got)
                    .split(' ')
                    .nth(1)
                    .unwrap_or("none")
                    .to_owned(),
                _ => {
                    // The close frame is the last thing the server sends: 0x88, length 2+.
                    let head = got.windows(2).rposition(|w| w[0] == 0x88 && w[1] >= 2);
                    head.map(|i| u16::from_be_bytes([got[i + 2], got[i + 3]]).to_string())
                        .unwrap_or_else(|| format!("no close frame in {got:?}"))
                }
            };
            assert_eq!(answer, want, "{name}");
            checked += 1;
        }
        assert!(checked >= 30, "only {checked} corpus cases checked");
    });
}

/// Whether `got` holds a whole answer: an HTTP head, or after the 101 head a close frame.
fn answered(ext: &str, got: &[u8]) -> bool {
    let Some(head) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    if ext == "http" {
        return true;
    }
    let frames = &got[head + 4..];
    frames
        .windows(2)
        .position(|w| w[0] == 0x88 && w[1] >= 2)
        .is_some_and(|i| frames.len() >= i + 4)
}

/// The RFC 6455 §1.3 sample key, "dGhlIHNhbXBsZSBub25jZQ==".
fn rfc_key() -> handshake::Key {
    handshake::Key::from_nonce(*b"the sample nonce")
}
