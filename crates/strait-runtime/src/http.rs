//! The HTTP API of a [`Runtime`](crate::Runtime) (`strait run`) and of a one-shot copy: health
//! and offset translation over the live, persisted map of every flow, for services that
//! translate offsets on their own (`docs/design.md` §5–§6), and the runtime's control
//! ([`crate::control`]).
//!
//! - `GET /healthz`: `200 {"status":"ok","flows":[...]}` while the process runs (liveness).
//! - `GET /readyz`: `200` when every flow of this instance is running (its last round finished
//!   within 30 s), else `503`; either way `{"ready":..,"flows":[{"flow","state","last_error"}]}`
//!   (readiness: a flow starting, waiting on a slow cluster, stalled or failed is not ready).
//! - `GET /v1/translate?topic=T&partition=P&offset=O[&flow=A->B][&direction=reverse]`: where the
//!   source position `O` of `T`-`P` continues on the target (or, reversed, where the target
//!   position `O` of the remote topic of `T` continues on the source).
//! - `GET /v1/groups/{group}[?flow=A->B]`: the group's committed source offsets, translated.
//! - `GET /v1/status`: per flow, topic and partition, where mirroring stands: source end,
//!   position, lag, throughput, lost records, last error, groups checkpointed and synced
//!   ([`strait_core::status`]; what `strait status` shows).
//! - `GET /v1/readiness[?flow=A->B][&within=SECONDS]`: is it safe to fail over now? Per flow,
//!   what a failover at this moment would leave behind if the source were lost (records not yet
//!   mirrored and how long they have waited; per group, what it consumed after its last
//!   checkpoint and how old that is), as `strait failover check` shows it; `200` when every
//!   flow is ready within `within` (default 5 s), else `503`.
//! - `GET /metrics`: every metric of `docs/metrics.md` in Prometheus text format, rendered here
//!   by the recorder [`metrics_handle`] installs (the exporter has no listener of its own).
//! - `POST /v1/flows/{flow}/pause|resume`, `POST /v1/reload`: [`crate::control`]'s requests,
//!   answered with its [`FlowRequested`] and [`Reloaded`]; `409` from a one-shot copy. Who may
//!   send them is [`crate::access`]'s to say (401, 403); the server's limits are
//!   [`crate::server`]'s.
//!
//! Answers are JSON. The map read is the one last written to the map topic, so an answer never
//! rests on a mapping a crash could take back. Errors are `{"error": "..."}` with 400 (bad
//! query or path, a config that does not load), 404 (unknown path or flow, partition not
//! mirrored), 405 (a path asked with another method), 502 (the source cluster did not answer)
//! or 503 (stopping; a flow asked about that has not started, whose answer is not known).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use metrics_util::MetricKindMask;
use serde::Deserialize;
use serde_json::{json, Value};
use strait_core::config::FlowConfig;
use strait_core::offsets;
use strait_kafka::Client;
use strait_wire::offset_map::{OffsetMap, SourcePartition};
use tokio::sync::{mpsc, oneshot, watch};

use crate::access::{self, Access, ControlToken};
use crate::control::{ask, ControlError, ControlRequest, FlowRequested, Reloaded};
use crate::error::Error;
use crate::server::{self, HttpLimits};

/// What the API needs of one running flow.
#[derive(Debug, Clone)]
pub(crate) struct ApiFlow {
    /// The flow's config.
    pub(crate) config: FlowConfig,
    /// A client of its source cluster, for group offsets.
    pub(crate) source: Client,
    /// A client of its target cluster, for checkpoints (`/v1/readiness`) and the remote
    /// partitions' ends (`offsets::at_remote_end`).
    pub(crate) target: Client,
    /// The flow's map as last persisted.
    pub(crate) map: watch::Receiver<Arc<OffsetMap>>,
}

impl ApiFlow {
    fn map(&self) -> Arc<OffsetMap> {
        Arc::clone(&self.map.borrow())
    }
}

/// The flows the API answers for, as they are now: a reload adds and removes flows, and a flow
/// waiting for its clusters has no client or map yet (`live` is `None`).
#[derive(Debug, Default)]
pub(crate) struct Api {
    flows: RwLock<BTreeMap<String, ApiEntry>>,
    /// Where pause, resume and reload go (`strait run`'s supervisor); `None` for a one-shot
    /// copy, which takes no commands.
    control: Option<mpsc::Sender<ControlRequest>>,
}

#[derive(Debug)]
struct ApiEntry {
    config: FlowConfig,
    live: Option<ApiFlow>,
}

impl Api {
    /// A table that passes pause, resume and reload to `control`.
    pub(crate) fn with_control(control: mpsc::Sender<ControlRequest>) -> Self {
        Self {
            flows: RwLock::default(),
            control: Some(control),
        }
    }

    /// A fixed set of running flows, without control (a one-shot copy).
    pub(crate) fn fixed(flows: Vec<ApiFlow>) -> Self {
        let api = Self::default();
        for flow in flows {
            api.set(&flow.config.clone(), Some(flow));
        }
        api
    }

    /// Adds `flow` or replaces what is known of it; `live` once it runs.
    pub(crate) fn set(&self, flow: &FlowConfig, live: Option<ApiFlow>) {
        write(&self.flows).insert(
            flow.name(),
            ApiEntry {
                config: flow.clone(),
                live,
            },
        );
    }

    /// Takes a flow away (a reload removed it).
    pub(crate) fn remove(&self, name: &str) {
        write(&self.flows).remove(name);
    }

    fn names(&self) -> Vec<String> {
        read(&self.flows).keys().cloned().collect()
    }

    /// The status of the flows this API answers for ([`strait_core::status`]).
    pub(crate) fn status(&self) -> strait_core::status::StatusReport {
        let mut report = strait_core::status::snapshot();
        let names = self.names();
        report.flows.retain(|f| names.contains(&f.flow));
        report
    }

    /// Every flow a request is about, running or not: the one named by `flow=`, else every
    /// one of this instance, each with what the API has of it once it runs.
    fn asked(&self, name: Option<&str>) -> Result<Vec<(FlowConfig, Option<ApiFlow>)>, ApiError> {
        let flows = read(&self.flows);
        let pick = |e: &ApiEntry| (e.config.clone(), e.live.clone());
        match name {
            None => Ok(flows.values().map(pick).collect()),
            Some(name) => match flows.get(name) {
                Some(entry) => Ok(vec![pick(entry)]),
                None => Err(not_found(format!(
                    "no flow {name}; this instance runs {}",
                    flows.keys().cloned().collect::<Vec<_>>().join(", ")
                ))),
            },
        }
    }

    /// The flows of this instance that have not started (their clusters do not answer yet).
    fn waiting(&self) -> Vec<String> {
        read(&self.flows)
            .iter()
            .filter(|(_, e)| e.live.is_none())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The running flows a request is about: the one named by `flow=`, else every one running.
    fn pick(&self, name: Option<&str>) -> Result<Vec<ApiFlow>, ApiError> {
        let flows = read(&self.flows);
        match name {
            None => Ok(flows.values().filter_map(|e| e.live.clone()).collect()),
            Some(name) => match flows.get(name) {
                Some(ApiEntry {
                    live: Some(live), ..
                }) => Ok(vec![live.clone()]),
                Some(entry) => Err(ApiError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "flow {name} has not started yet (waiting for {} or {}); see /v1/status",
                        entry.config.source, entry.config.target
                    ),
                )),
                None => Err(not_found(format!(
                    "no flow {name}; this instance runs {}",
                    flows.keys().cloned().collect::<Vec<_>>().join(", ")
                ))),
            },
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Flows = Arc<Api>;

/// Every route of the API over `api`: the reads, and the control requests behind `access`
/// ([`crate::access`]), each within its time of `limits`.
fn router(api: Arc<Api>, access: Access, limits: HttpLimits) -> Router {
    metrics_handle();
    let reads = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .route("/v1/status", get(status))
        .route("/v1/translate", get(translate))
        .route("/v1/groups/{group}", get(group))
        .route("/v1/readiness", get(readiness))
        .route_layer(middleware::from_fn_with_state(
            limits.request_timeout,
            server::time_limit,
        ));
    let control = Router::new()
        .route("/v1/flows/{flow}/pause", post(pause))
        .route("/v1/flows/{flow}/resume", post(resume))
        .route("/v1/reload", post(reload))
        .route_layer(middleware::from_fn_with_state(
            limits.control_timeout,
            server::time_limit,
        ))
        .route_layer(middleware::from_fn_with_state(access, access::guard));
    reads
        .merge(control)
        .fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .with_state(api)
}

/// Any other path: 404 in the API's error form, naming the paths there are.
async fn unknown_path() -> ApiError {
    not_found(
        "no such path; the API answers GET /healthz, /readyz, /metrics, /v1/status, \
         /v1/translate, /v1/groups/{group}, /v1/readiness and POST /v1/flows/{flow}/pause, \
         /v1/flows/{flow}/resume, /v1/reload (docs/http-api.md)",
    )
}

/// A path of the API asked with another method: 405 in the API's error form.
async fn wrong_method() -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed here: the reads are GET, pause, resume and reload are POST".into(),
    )
}

/// A path segment (`{group}`, `{flow}`) that does not decode: 400 in the API's error form.
fn bad_path(e: PathRejection) -> ApiError {
    bad_request(e.body_text())
}

/// Binds `addr` (an error names it, e.g. when the port is taken).
///
/// Installs the metrics recorder too, so the flows started after it count from their start.
pub(crate) async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, Error> {
    metrics_handle();
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| Error::Listen { addr, error })
}

/// Serves the API on `listener` until `stop` resolves (then for at most
/// [`HttpLimits::shutdown_grace`] more), its control requests behind `token`
/// ([`Access::new`]: without one, open on a loopback address, refused on any other).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    api: Arc<Api>,
    token: Option<ControlToken>,
    limits: HttpLimits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let access = Access::new(listener.local_addr()?, token);
    server::serve(listener, router(api, access, limits), limits, stop).await
}

/// How long a group's series stay on `/metrics` without being updated: a live group's are
/// touched every [`UPKEEP`] (`strait_core::metrics::touch_groups`), a gone group's leave.
const GROUP_SERIES_IDLE: Duration = Duration::from_secs(60);

/// How often the recorders' upkeep runs.
const UPKEEP: Duration = Duration::from_secs(5);

/// The process's Prometheus recorders.
pub(crate) struct Recorders {
    /// Installed as the `metrics` recorder.
    main: PrometheusHandle,
    /// The consumer groups' series (`strait_core::metrics::set_group_recorder`), forgotten
    /// [`GROUP_SERIES_IDLE`] after their last update.
    groups: PrometheusHandle,
}

impl Recorders {
    /// Both recorders' series, in Prometheus text format (no metric is in both); run
    /// [`Recorders::run_upkeep`] first.
    fn render(&self) -> String {
        // Without the gauges of units and partitions this process no longer runs.
        let mut text = strait_core::metrics::hide_released(&self.main.render());
        text.push_str(&self.groups.render());
        text
    }

    fn run_upkeep(&self) {
        strait_core::metrics::touch_groups();
        self.main.run_upkeep();
        self.groups.run_upkeep();
    }
}

/// A recorder with strait's buckets (the `_ms` histograms get
/// [`strait_core::metrics::LATENCY_BUCKETS_MS`]).
fn builder() -> PrometheusBuilder {
    match PrometheusBuilder::new().set_buckets_for_metric(
        Matcher::Suffix("_ms".into()),
        strait_core::metrics::LATENCY_BUCKETS_MS,
    ) {
        Ok(b) => b,
        // Only an empty bucket list is refused: histograms render as summaries then.
        Err(_) => PrometheusBuilder::new(),
    }
}

/// The process's Prometheus recorders, installed on first call: the main one as the `metrics`
/// recorder, the groups' one as `strait_core`'s group recorder. Their upkeep runs every
/// [`UPKEEP`] on the Tokio runtime of the first caller, when there is one, and before every
/// render.
pub(crate) fn metrics_handle() -> &'static Recorders {
    static HANDLE: OnceLock<Recorders> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = builder().build_recorder();
        let main = recorder.handle();
        let groups: &'static PrometheusRecorder = Box::leak(Box::new(
            builder()
                .idle_timeout(MetricKindMask::ALL, Some(GROUP_SERIES_IDLE))
                .build_recorder(),
        ));
        let recorders = Recorders {
            main,
            groups: groups.handle(),
        };
        match metrics::set_global_recorder(recorder) {
            Ok(()) => {
                strait_core::metrics::describe();
                if strait_core::metrics::set_group_recorder(groups) {
                    metrics::with_local_recorder(groups, strait_core::metrics::describe);
                }
            }
            Err(e) => tracing::warn!(error = %e, "another metrics recorder is installed: /metrics shows nothing"),
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut every = tokio::time::interval(UPKEEP);
                loop {
                    every.tick().await;
                    metrics_handle().run_upkeep();
                }
            });
        }
        recorders
    })
}

/// `GET /metrics`: Prometheus text format.
async fn prometheus() -> Response {
    let handle = metrics_handle();
    strait_core::metrics::refresh();
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}

/// `GET /v1/status`: the status of this instance's flows ([`strait_core::status`]).
async fn status(State(flows): State<Flows>) -> Json<strait_core::status::StatusReport> {
    Json(flows.status())
}

/// An error answer.
#[derive(Debug)]
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        let code = match e {
            ControlError::NoFlow { .. } => StatusCode::NOT_FOUND,
            ControlError::Stopping => StatusCode::SERVICE_UNAVAILABLE,
            ControlError::OneShot => StatusCode::CONFLICT,
            ControlError::Reload(_) => StatusCode::BAD_REQUEST,
        };
        ApiError(code, e.to_string())
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

fn not_found(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, message.into())
}

async fn healthz(State(flows): State<Flows>) -> Json<Value> {
    Json(json!({ "status": "ok", "flows": flows.names() }))
}

/// `GET /readyz`: whether every flow of this instance is running or deliberately paused.
async fn readyz(State(flows): State<Flows>) -> Response {
    use strait_core::status::FlowState;
    let report = strait_core::status::snapshot();
    let names = flows.names();
    let mut ready = !names.is_empty();
    let states: Vec<Value> = names
        .into_iter()
        .map(|name| {
            let status = report.flows.iter().find(|f| f.flow == name);
            let running =
                status.is_some_and(|f| matches!(f.state, FlowState::Running | FlowState::Paused));
            ready &= running;
            json!({
                "flow": name,
                "state": status.map(|f| f.state),
                "last_error": status.and_then(|f| f.last_error.as_ref()).map(|e| &e.message),
                // Named also for a flow not started yet (its worker cannot join its group).
                "unreachable": strait_core::status::unreachable_in(
                    &name.split("->").collect::<Vec<_>>()
                ),
            })
        })
        .collect();
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(json!({ "ready": ready, "flows": states }))).into_response()
}

#[derive(Debug, Deserialize)]
struct TranslateQuery {
    topic: Option<String>,
    partition: Option<i32>,
    offset: Option<i64>,
    flow: Option<String>,
    direction: Option<String>,
}

async fn translate(
    State(flows): State<Flows>,
    query: Result<Query<TranslateQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let (Some(topic), Some(partition), Some(offset)) = (q.topic, q.partition, q.offset) else {
        return Err(bad_request(
            "give topic (the source topic), partition and offset, e.g. \
             /v1/translate?topic=orders&partition=0&offset=42",
        ));
    };
    let reverse = match q.direction.as_deref() {
        None | Some("forward") => false,
        Some("reverse") => true,
        Some(other) => {
            return Err(bad_request(format!(
                "direction is forward (source to target, the default) or reverse, not {other}"
            )))
        }
    };
    if offset < 0 {
        return Err(bad_request("offset must be 0 or more"));
    }
    let sp = SourcePartition::new(topic.clone(), partition);
    let mut answers = Vec::new();
    for flow in flows.pick(q.flow.as_deref())? {
        let map = flow.map();
        if map.partition(&sp).is_none() {
            continue;
        }
        let mut answer = json!({
            "flow": flow.config.name(),
            "topic": topic,
            "partition": partition,
            "remote_topic": flow.config.remote_topic(&topic),
        });
        if reverse {
            let t = map.translate_back(&sp, offset);
            answer["target_offset"] = json!(offset);
            answer["source_offset"] = json!(t.source());
            answer["exact"] = json!(t.is_exact());
            answer["result"] = crate::rows::reverse_json(&t);
            answer["note"] = json!(offsets::describe_back(&t));
        } else {
            // Through the map, then the target's end for a partition mirrored without a record.
            let mut rows = [offsets::TranslatedOffset {
                topic: topic.clone(),
                partition,
                remote_topic: flow.config.remote_topic(&topic),
                source_offset: offset,
                metadata: None,
                translation: map.translate(&sp, offset),
            }];
            offsets::at_remote_end(Some(&flow.source), &flow.target, &map, &mut rows).await;
            let [row] = rows;
            let t = row.translation;
            answer["source_offset"] = json!(offset);
            answer["target_offset"] = json!(t.target());
            answer["exact"] = json!(t.is_exact());
            answer["result"] = crate::rows::translation_json(&t);
            answer["note"] = json!(offsets::describe(&t));
        }
        answers.push(answer);
    }
    let waiting = flows.waiting();
    match answers.len() {
        // A flow that has not started may mirror it: not known yet, rather than "not mirrored".
        0 if q.flow.is_none() && !waiting.is_empty() => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{topic}-{partition} is not mirrored by a running flow, and {} has not started \
                 (its clusters do not answer yet); see /v1/status",
                waiting.join(", ")
            ),
        )),
        0 => Err(not_found(format!(
            "{topic}-{partition} is not mirrored by {}",
            q.flow.as_deref().unwrap_or("any flow of this instance")
        ))),
        1 => Ok(Json(answers.remove(0))),
        _ => Err(bad_request(format!(
            "{topic}-{partition} is mirrored by several flows ({}); say which with flow=",
            answers
                .iter()
                .filter_map(|a| a["flow"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[derive(Debug, Deserialize)]
struct GroupQuery {
    flow: Option<String>,
    topic: Option<String>,
}

async fn group(
    State(flows): State<Flows>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<GroupQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(group) = path.map_err(bad_path)?;
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    // A flow that has not started has not read the group's offsets: its part of the answer
    // is not known, which an empty list would pass off as "no committed offsets".
    let asked = flows.asked(q.flow.as_deref())?;
    let waiting: Vec<String> = asked
        .iter()
        .filter(|(_, live)| live.is_none())
        .map(|(config, _)| config.name())
        .collect();
    if !waiting.is_empty() {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not known yet: {} has not started (its clusters do not answer yet); see \
                 /v1/status, or ask one flow that runs with ?flow=",
                waiting.join(", ")
            ),
        ));
    }
    let mut out = Vec::new();
    for flow in asked.into_iter().filter_map(|(_, live)| live) {
        let map = flow.map();
        let mut rows =
            offsets::translate_group(&flow.source, &flow.config, &map, &group, q.topic.as_deref())
                .await
                .map_err(|e| {
                    ApiError(
                        StatusCode::BAD_GATEWAY,
                        format!(
                            "flow {}: cannot read group {group} on the source: {e}",
                            flow.config.name()
                        ),
                    )
                })?;
        offsets::at_remote_end(Some(&flow.source), &flow.target, &map, &mut rows).await;
        let partitions: Vec<crate::rows::GroupOffsetRow> = rows
            .iter()
            .map(|t| crate::rows::GroupOffsetRow::new(&flow.config.name(), &group, t))
            .collect();
        out.push(json!({ "flow": flow.config.name(), "partitions": partitions }));
    }
    Ok(Json(json!({ "group": group, "flows": out })))
}

#[derive(Debug, Deserialize)]
struct ReadinessQuery {
    flow: Option<String>,
    within: Option<f64>,
}

/// `GET /v1/readiness`: [`offsets::readiness::assess`] of each flow asked for, every flow of
/// this instance without `flow=`. A flow that is not mirroring now (not started, waiting for
/// a cluster, paused, stalled, restarting or failed) is not ready, with its state as the
/// reason: what it mirrored before says nothing of what is written now.
async fn readiness(
    State(flows): State<Flows>,
    query: Result<Query<ReadinessQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let within = offsets::readiness::within(q.within.unwrap_or(5.0)).map_err(bad_request)?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let report = strait_core::status::snapshot();
    let mut out = Vec::new();
    let mut ready = true;
    let asked = flows.asked(q.flow.as_deref())?;
    if asked.is_empty() {
        // Nothing to fail over is not "ready": no flow says anything.
        ready = false;
    }
    for (config, live) in asked {
        let state = report
            .flows
            .iter()
            .find(|f| f.flow == config.name())
            .map(|f| (f.state, f.last_error.as_ref().map(|e| e.message.clone())));
        let why = not_mirroring(&config, state);
        let answer = match live {
            // What it left behind is read whether it runs or not (the source may not answer:
            // `source_error` says so); a flow not mirroring now is not ready either way.
            Some(flow) => {
                let mut answer = offsets::readiness::assess(
                    Ok(&flow.source),
                    &flow.target,
                    &flow.config,
                    &flow.map(),
                    now_ms,
                )
                .await
                .map_err(|e| {
                    ApiError(
                        StatusCode::BAD_GATEWAY,
                        format!(
                            "flow {}: cannot read its checkpoints on the target: {e}",
                            flow.config.name()
                        ),
                    )
                })?;
                answer.not_running = why;
                answer
            }
            None => offsets::readiness::FlowReadiness::not_running(
                &config,
                why.unwrap_or_else(|| {
                    format!(
                        "not started: waiting for {} or {} to answer",
                        config.source, config.target
                    )
                }),
            ),
        };
        let flow_ready = answer.ready_within(within);
        ready &= flow_ready;
        let mut value = serde_json::to_value(&answer).unwrap_or_default();
        value["ready"] = flow_ready.into();
        out.push(value);
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({ "ready": ready, "within_seconds": within.as_secs_f64(), "flows": out });
    Ok((status, Json(body)).into_response())
}

/// Why `flow` is not mirroring now, from its state on the status board (`None` there: it
/// has not started); `None` while it runs.
fn not_mirroring(
    flow: &FlowConfig,
    state: Option<(strait_core::status::FlowState, Option<String>)>,
) -> Option<String> {
    use strait_core::status::FlowState;
    let (state, error) = match state {
        None => {
            return Some(format!(
                "not started: waiting for {} or {} to answer",
                flow.source, flow.target
            ))
        }
        Some((FlowState::Running, _)) => return None,
        Some(state) => state,
    };
    let why = match state {
        FlowState::Starting => "starting: no round finished yet",
        FlowState::Waiting => "waiting: no round finished for 30 s",
        FlowState::Stalled => "stalled: its last round failed; retrying",
        FlowState::Restarting => "restarting after a failure",
        FlowState::Paused => "paused by an operator",
        FlowState::Failed => "failed",
        FlowState::Running => return None,
    };
    Some(match error {
        Some(e) => format!("{why} (last error: {e})"),
        None => why.to_owned(),
    })
}

/// `POST /v1/flows/{flow}/pause`.
async fn pause(
    State(api): State<Flows>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<FlowRequested>, ApiError> {
    let Path(flow) = path.map_err(bad_path)?;
    control(&api, |reply| ControlRequest::Pause(flow, reply)).await
}

/// `POST /v1/flows/{flow}/resume`.
async fn resume(
    State(api): State<Flows>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<FlowRequested>, ApiError> {
    let Path(flow) = path.map_err(bad_path)?;
    control(&api, |reply| ControlRequest::Resume(flow, reply)).await
}

/// `POST /v1/reload`.
async fn reload(State(api): State<Flows>) -> Result<Json<Reloaded>, ApiError> {
    control(&api, ControlRequest::Reload).await
}

/// Hands a request to the runtime's supervisor and waits for its answer.
async fn control<T>(
    api: &Api,
    request: impl FnOnce(oneshot::Sender<Result<T, ControlError>>) -> ControlRequest,
) -> Result<Json<T>, ApiError> {
    let Some(control) = &api.control else {
        return Err(ControlError::OneShot.into());
    };
    Ok(Json(ask(control, request).await?))
}
