//! Streaming uploads to S3: objects smaller than one part go up in one PutObject;
//! larger ones as a multipart upload with at most `concurrency` parts in flight, so
//! memory stays at (concurrency + 1) × part size whatever the object size. A failed
//! upload is aborted (and the bucket's lifecycle rule cleans up if even that fails).

use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};

use super::S3Store;
use crate::error::{Error, ErrorKind, Result};
use crate::store::{BoxReader, ObjectStore, read_part};

pub(super) async fn put_reader(
    s: &S3Store,
    bucket: &str,
    key: &str,
    mut reader: BoxReader,
) -> Result<u64> {
    let first = read_part(&mut reader, s.part_size).await?;
    if first.len() < s.part_size {
        let n = first.len() as u64;
        s.put(bucket, key, first).await?;
        return Ok(n);
    }
    let created = s
        .retrier
        .run("create_multipart_upload", || async {
            s.client
                .create_multipart_upload()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| s.err(e, format_args!("start multipart upload {bucket}/{key}")))
        })
        .await?;
    let upload_id = created
        .upload_id()
        .ok_or_else(|| Error::new(ErrorKind::Transient, "multipart upload without an id"))?
        .to_string();

    let result = upload_parts(s, bucket, key, &upload_id, first, &mut reader).await;
    match result {
        Ok((parts, total)) => {
            let done = CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build();
            let completed = s
                .retrier
                .run("complete_multipart_upload", || async {
                    s.client
                        .complete_multipart_upload()
                        .bucket(bucket)
                        .key(key)
                        .upload_id(&upload_id)
                        .multipart_upload(done.clone())
                        .send()
                        .await
                        .map_err(|e| {
                            s.err(e, format_args!("complete multipart upload {bucket}/{key}"))
                        })
                })
                .await;
            match completed {
                Ok(_) => Ok(total),
                Err(e) => {
                    abort(s, bucket, key, &upload_id).await;
                    Err(e)
                }
            }
        }
        Err(e) => {
            abort(s, bucket, key, &upload_id).await;
            Err(e)
        }
    }
}

async fn upload_parts(
    s: &S3Store,
    bucket: &str,
    key: &str,
    upload_id: &str,
    first: Bytes,
    reader: &mut BoxReader,
) -> Result<(Vec<CompletedPart>, u64)> {
    let mut in_flight = FuturesUnordered::new();
    let mut parts = Vec::new();
    let mut next = Some(first);
    let mut part_number = 1i32;
    let mut total = 0u64;
    loop {
        while in_flight.len() >= s.concurrency {
            if let Some(done) = in_flight.next().await {
                parts.push(done?);
            }
        }
        let chunk = match next.take() {
            Some(c) => c,
            None => read_part(reader, s.part_size).await?,
        };
        if chunk.is_empty() {
            break;
        }
        let last = chunk.len() < s.part_size;
        total += chunk.len() as u64;
        in_flight.push(upload_part(s, bucket, key, upload_id, part_number, chunk));
        part_number += 1;
        if last {
            break;
        }
    }
    while let Some(done) = in_flight.next().await {
        parts.push(done?);
    }
    parts.sort_by_key(|p| p.part_number());
    Ok((parts, total))
}

async fn upload_part(
    s: &S3Store,
    bucket: &str,
    key: &str,
    upload_id: &str,
    part_number: i32,
    chunk: Bytes,
) -> Result<CompletedPart> {
    let out = s
        .retrier
        .run("upload_part", || async {
            s.client
                .upload_part()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(part_number)
                .body(SdkByteStream::from(chunk.clone()))
                .send()
                .await
                .map_err(|e| {
                    s.err(
                        e,
                        format_args!("upload part {part_number} of {bucket}/{key}"),
                    )
                })
        })
        .await?;
    Ok(CompletedPart::builder()
        .part_number(part_number)
        .set_e_tag(out.e_tag().map(str::to_string))
        .build())
}

async fn abort(s: &S3Store, bucket: &str, key: &str, upload_id: &str) {
    let r = s
        .client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await;
    if let Err(e) = r {
        tracing::warn!(bucket, error = %s.err(e, "abort multipart upload"), "multipart upload left behind; the lifecycle rule removes it");
    }
}
