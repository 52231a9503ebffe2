//! Broker throttling (KIP-219): a broker over a quota answers at once with `throttle_time_ms`
//! and expects the client to send nothing more on that connection until the time has passed.

use kafka_protocol::messages::*;

/// A response that may carry a throttle time.
pub trait ThrottleTime {
    /// The throttle time in milliseconds, if the response has the field.
    fn throttle_time_ms(&self) -> Option<i32>;
}

macro_rules! throttled {
    ($($t:ty),* $(,)?) => {$(
        impl ThrottleTime for $t {
            fn throttle_time_ms(&self) -> Option<i32> {
                Some(self.throttle_time_ms)
            }
        }
    )*};
}

throttled!(
    ApiVersionsResponse,
    MetadataResponse,
    FetchResponse,
    ProduceResponse,
    ListOffsetsResponse,
    InitProducerIdResponse,
    FindCoordinatorResponse,
    ListGroupsResponse,
    DescribeGroupsResponse,
    OffsetFetchResponse,
    OffsetCommitResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
    CreatePartitionsResponse,
    DescribeClusterResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteRecordsResponse,
    ConsumerGroupDescribeResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    TxnOffsetCommitResponse,
    EndTxnResponse,
    ListTransactionsResponse,
);
