"""What the job reads from a micro-batch's progress, on every kind of source it runs on."""

from __future__ import annotations

from streaming.job import skipped_offsets


def test_skipped_offsets_counts_kafka_gaps_and_reads_other_sources_as_none() -> None:
    """A Kafka source's gap (end - start offsets minus the records read) is counted; a file
    source's offsets (``{"logOffset": n}``: the job over Parquet, as the tests and the
    pipeline benchmark run it) count nothing -- they made the job's progress listener raise
    on every batch, an error in the log and no count."""
    kafka = {
        "startOffset": '{"events":{"0":10,"1":5}}',
        "endOffset": '{"events":{"0":20,"1":9}}',
        "numInputRows": 11,
    }
    files = {"startOffset": '{"logOffset":1}', "endOffset": '{"logOffset":3}', "numInputRows": 5}
    assert skipped_offsets({"sources": [kafka]}) == 3
    assert skipped_offsets({"sources": [files]}) == 0
    assert skipped_offsets({"sources": [files, kafka]}) == 3
