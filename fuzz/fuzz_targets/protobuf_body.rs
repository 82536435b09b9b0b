//! Arbitrary bytes into the embedded API server's protobuf body decoder
//! (`granary_apiserver::decode_protobuf_body`): what kubectl sends as
//! `application/vnd.kubernetes.protobuf`, from any client that can reach the server. Any
//! panic is a bug; so is a refusal other than 400/415, memory use past the budget, or an
//! accepted body whose JSON is not an object naming its apiVersion and kind.

#![no_main]

use granary_apiserver::decode_protobuf_body;
use granary_fuzz::measure;
use libfuzzer_sys::fuzz_target;

/// Peak memory one decode of a fuzz input (at most 32 KiB) may use.
const MEMORY_BUDGET: usize = 16 << 20;

fuzz_target!(|data: &[u8]| {
    // Half the inputs get the `k8s\0` prefix, so the fuzzer reaches the envelope.
    let body = match data.split_first() {
        Some((mode, rest)) if mode % 2 == 0 => [&b"k8s\0"[..], rest].concat(),
        _ => data.to_vec(),
    };
    let (decoded, used) = measure(|| decode_protobuf_body(&body));
    assert!(used.peak <= MEMORY_BUDGET, "decoding used {used:?}");
    match decoded {
        Ok(obj) => {
            assert!(obj.is_object(), "not an object: {obj}");
            assert!(obj["apiVersion"].is_string() && obj["kind"].is_string(), "{obj}");
        }
        Err((code, message)) => {
            assert!(code == 400 || code == 415, "{code}: {message}");
            assert!(!message.is_empty());
        }
    }
});
