//! Fuzz bodies. Each `pub fn` here is the whole body of one `cargo fuzz` target in `fuzz/`, and
//! runs under `cargo test` on fixed inputs too. Not a stable API.

use crate::body::{
    ConsumerOffsetSerializeWrapper, GetConsumerListByGroupResponseBody, HeartbeatData, JsonBody,
    LockBatchRequestBody, LockBatchResponseBody, RegisterBrokerBody, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper, TopicRouteData, UnlockBatchRequestBody,
};
use crate::header::{self, CommandHeader};
use crate::{DecodeError, FrameDecoder, RemotingCommand};

/// Chunk lengths covering `len` bytes, drawn from `seed` (a deterministic LCG).
fn chunk_lengths(seed: u64, len: usize) -> Vec<usize> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = ((state >> 33) as usize % 97 + 1).min(left);
        out.push(n);
        left -= n;
    }
    out
}

/// Everything a decoder makes of `stream` fed in `chunks`: each command or error, in order,
/// stopping after an error that breaks the stream. Checks the buffer bound after every chunk.
pub fn decode_stream(
    stream: &[u8],
    max_frame_len: usize,
    chunks: impl IntoIterator<Item = usize>,
) -> Vec<Result<RemotingCommand, DecodeError>> {
    let mut d = FrameDecoder::with_max_frame_len(max_frame_len);
    let mut out = Vec::new();
    let mut at = 0;
    for n in chunks {
        d.feed(&stream[at..at + n]);
        at += n;
        loop {
            match d.decode() {
                Ok(Some(cmd)) => out.push(Ok(cmd)),
                Ok(None) => break,
                Err(e) => {
                    let fatal = e.breaks_stream();
                    out.push(Err(e));
                    if fatal {
                        assert!(d.is_broken());
                        assert_eq!(d.buffered(), 0, "a broken decoder keeps nothing");
                        return out;
                    }
                }
            }
        }
        // Drained: what is left is the start of one frame, under the limit.
        assert!(d.buffered() < max_frame_len.max(4), "buffered {} of a {max_frame_len} limit", d.buffered());
        assert!(d.wants_read());
    }
    assert_eq!(at, stream.len());
    out
}

/// Fuzz target `remoting_decoder`: the frame decoder never panics, decodes the same under any
/// chunking, keeps its buffer under one frame, and every command it returns re-encodes to bytes
/// that decode to the same command; typed headers and bodies read from it never panic.
pub fn remoting_decoder(data: &[u8]) {
    let Some((&knobs, stream)) = data.split_first() else {
        return;
    };
    // A small limit now and then, so the limit itself is fuzzed.
    let max_frame_len =
        if knobs & 0x80 != 0 { usize::from(knobs & 0x7f) * 16 } else { crate::DEFAULT_MAX_FRAME_LEN };
    let whole = decode_stream(stream, max_frame_len, [stream.len()]);
    let chunked = decode_stream(stream, max_frame_len, chunk_lengths(u64::from(knobs), stream.len()));
    assert_eq!(whole, chunked, "decoding depends on chunking");
    for cmd in whole.iter().flatten() {
        let wire = cmd.to_bytes().expect("a decoded command re-encodes in its own encoding");
        let again = decode_stream(&wire, wire.len().max(crate::DEFAULT_MAX_FRAME_LEN), [wire.len()]);
        assert_eq!(again, [Ok(cmd.clone())], "re-encoding changed the command");
        read_everything(cmd);
    }
}

/// Reads every typed header and body from `cmd`, for their panics.
fn read_everything(cmd: &RemotingCommand) {
    fn h<H: CommandHeader + PartialEq + std::fmt::Debug>(cmd: &RemotingCommand) {
        if let Ok(header) = cmd.decode_header::<H>() {
            let mut fields = crate::ExtFields::new();
            header.write_ext_fields(&mut fields);
            assert_eq!(
                H::from_ext_fields(&fields).as_ref(),
                Ok(&header),
                "a header changed through extFields"
            );
        }
    }
    h::<header::SendMessageRequestHeader>(cmd);
    h::<header::SendMessageRequestHeaderV2>(cmd);
    h::<header::SendMessageResponseHeader>(cmd);
    h::<header::PullMessageRequestHeader>(cmd);
    h::<header::PullMessageResponseHeader>(cmd);
    h::<header::QueryConsumerOffsetRequestHeader>(cmd);
    h::<header::UpdateConsumerOffsetRequestHeader>(cmd);
    h::<header::GetMaxOffsetRequestHeader>(cmd);
    h::<header::SearchOffsetRequestHeader>(cmd);
    h::<header::ViewMessageRequestHeader>(cmd);
    h::<header::QueryMessageRequestHeader>(cmd);
    h::<header::UnregisterClientRequestHeader>(cmd);
    h::<header::ConsumerSendMsgBackRequestHeader>(cmd);
    h::<header::RegisterBrokerRequestHeader>(cmd);
    h::<header::RegisterBrokerResponseHeader>(cmd);
    h::<header::GetRouteInfoRequestHeader>(cmd);
    fn b<B: JsonBody + PartialEq + std::fmt::Debug>(body: &[u8]) {
        if let Ok(value) = B::decode(body) {
            assert_eq!(B::decode(&value.encode()).as_ref(), Ok(&value), "a body changed through JSON");
        }
    }
    b::<HeartbeatData>(&cmd.body);
    b::<LockBatchRequestBody>(&cmd.body);
    b::<LockBatchResponseBody>(&cmd.body);
    b::<UnlockBatchRequestBody>(&cmd.body);
    b::<GetConsumerListByGroupResponseBody>(&cmd.body);
    b::<TopicRouteData>(&cmd.body);
    b::<TopicConfigSerializeWrapper>(&cmd.body);
    b::<RegisterBrokerBody>(&cmd.body);
    b::<ConsumerOffsetSerializeWrapper>(&cmd.body);
    b::<SubscriptionGroupWrapper>(&cmd.body);
    if let Ok(body) = RegisterBrokerBody::decode_compressed(&cmd.body, 1 << 20) {
        // A body with a topic name Java's text cannot carry never decodes, so this encodes.
        let z = body.encode_compressed().expect("a decoded compressed body re-encodes");
        assert_eq!(RegisterBrokerBody::decode_compressed(&z, 1 << 21).as_ref(), Ok(&body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RequestCode, ResponseCode, SerializeType};

    fn corpus() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let commands = [
            RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
                .with_opaque(1)
                .with_ext_field("a", "pg")
                .with_ext_field("b", "TopicA")
                .with_body(&b"hello"[..]),
            RemotingCommand::request(RequestCode::HEART_BEAT)
                .with_serialize_type(SerializeType::RocketMq)
                .with_body(&br#"{"clientID":"c","producerDataSet":[{"groupName":"g"}]}"#[..]),
            RemotingCommand::response(ResponseCode::SUCCESS).with_remark("ok").with_body(
                &br#"{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"c"}]}"#[..],
            ),
        ];
        for cmd in &commands {
            let wire = cmd.to_bytes().unwrap();
            for knobs in [0u8, 7, 0x80 | 3, 0xff] {
                let mut input = vec![knobs];
                input.extend_from_slice(&wire);
                input.extend_from_slice(&wire);
                out.push(input.clone());
                input.truncate(input.len() - 3);
                out.push(input);
            }
        }
        // Garbage, and frames that are wrong in each way the decoder names.
        out.push(vec![0, 0xff, 0xff, 0xff, 0xff]);
        out.push(vec![0, 0, 0, 0, 2]);
        out.push([&[0u8][..], &8i32.to_be_bytes(), &0x0200_0004u32.to_be_bytes(), b"{}{}"].concat());
        out.push([&[0u8][..], &8i32.to_be_bytes(), &0x0100_0004u32.to_be_bytes(), b"\0\0\0\0"].concat());
        out.push([&[1u8][..], &6i32.to_be_bytes(), &2u32.to_be_bytes(), b"[]"].concat());
        out.push(b"\x05GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
        out
    }

    #[test]
    fn remoting_decoder_holds_on_its_corpus() {
        for input in corpus() {
            remoting_decoder(&input);
        }
    }

    #[test]
    fn remoting_decoder_holds_on_the_committed_fuzz_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/remoting_decoder");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("the fuzz corpus is committed") {
            remoting_decoder(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n > 0, "an empty corpus in {}", dir.display());
    }

    #[test]
    fn chunk_lengths_cover_the_stream() {
        for seed in 0..20 {
            assert_eq!(chunk_lengths(seed, 1000).iter().sum::<usize>(), 1000);
        }
    }
}
