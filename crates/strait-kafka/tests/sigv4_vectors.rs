//! strait's SigV4 (`strait_kafka::aws::sigv4`) against AWS's published test suite: the data in
//! `tests/sigv4_vectors/` (see its README for where it comes from). For each case: the
//! canonical request, the string to sign and the signature of the header-signed form, and the
//! signature of the presigned (query) form where the case is a plain `GET /`.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use strait_kafka::aws::sigv4::{self, Request, Scope};
use strait_kafka::aws::Credentials;
use strait_kafka::Secret;

struct Case {
    name: String,
    credentials: Credentials,
    region: String,
    service: String,
    time: std::time::SystemTime,
    sign_body: bool,
    expires: u64,
    method: String,
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
}

fn load(dir: &Path) -> Case {
    let context: serde_json::Value = serde_json::from_str(&read(dir, "context.json")).unwrap();
    let c = &context["credentials"];
    let credentials = Credentials {
        access_key_id: c["access_key_id"].as_str().unwrap().to_owned(),
        secret_access_key: Secret::new(c["secret_access_key"].as_str().unwrap()),
        session_token: c["token"].as_str().map(Secret::new),
        expires: None,
        source: "test vector".into(),
    };
    assert_eq!(context["timestamp"], "2015-08-30T12:36:00Z");
    let request = read(dir, "request.txt");
    let (head, body) = match request.split_once("\n\n") {
        Some((h, b)) => (h.to_owned(), b.as_bytes().to_vec()),
        None => (request.trim_end_matches('\n').to_owned(), Vec::new()),
    };
    let mut lines = head.lines();
    let request_line: Vec<&str> = lines.next().unwrap().split(' ').collect();
    let (path, query) = match request_line[1].split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (request_line[1].to_owned(), String::new()),
    };
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        credentials,
        region: context["region"].as_str().unwrap().to_owned(),
        service: context["service"].as_str().unwrap().to_owned(),
        time: UNIX_EPOCH + Duration::from_secs(1_440_938_160),
        sign_body: context["sign_body"].as_bool().unwrap_or(false),
        expires: context["expiration_in_seconds"].as_u64().unwrap(),
        method: request_line[0].to_owned(),
        path,
        query,
        headers,
        body,
    }
}

fn cases() -> Vec<(Case, std::path::PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sigv4_vectors");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 15, "vectors missing in {}", root.display());
    dirs.into_iter().map(|d| (load(&d), d)).collect()
}

#[test]
fn header_signing_matches_the_suite() {
    for (case, dir) in cases() {
        let mut headers = case.headers.clone();
        if case.sign_body {
            // The suite's signer adds the body's hash as a header when told to sign the body.
            headers.push(("x-amz-content-sha256".into(), sigv4::sha256_hex(&case.body)));
        }
        let scope = Scope {
            region: &case.region,
            service: &case.service,
            time: case.time,
        };
        let request = Request {
            method: &case.method,
            path: &case.path,
            query: case.query.clone(),
            headers: headers.clone(),
            body: &case.body,
        };
        // What sign_headers signs: the request plus x-amz-date and the session token.
        let mut signed = request.clone();
        signed.headers.push(("x-amz-date".into(), scope.amz_date()));
        if let Some(token) = &case.credentials.session_token {
            signed
                .headers
                .push(("x-amz-security-token".into(), token.expose().to_owned()));
        }
        let canonical = signed.canonical(&sigv4::sha256_hex(&case.body));
        assert_eq!(
            canonical,
            read(&dir, "header-canonical-request.txt"),
            "{}: canonical request",
            case.name
        );
        let to_sign = sigv4::string_to_sign(&scope, &canonical);
        assert_eq!(
            to_sign,
            read(&dir, "header-string-to-sign.txt"),
            "{}: string to sign",
            case.name
        );
        let added = sigv4::sign_headers(&request, &case.credentials, &scope);
        let authorization = &added.iter().find(|(k, _)| k == "authorization").unwrap().1;
        let expected = read(&dir, "header-signature.txt");
        assert!(
            authorization.ends_with(&format!("Signature={}", expected.trim())),
            "{}: {authorization}",
            case.name
        );
    }
}

#[test]
fn presigning_matches_the_suite() {
    let mut checked = 0;
    for (case, dir) in cases() {
        if case.method != "GET"
            || case.path != "/"
            || !case.query.is_empty()
            || case.headers.len() != 1
        {
            continue;
        }
        let scope = Scope {
            region: &case.region,
            service: &case.service,
            time: case.time,
        };
        let host = &case.headers[0].1;
        let query = sigv4::presign(host, &[], &case.credentials, &scope, case.expires);
        let signature = &query
            .iter()
            .find(|(k, _)| k == "X-Amz-Signature")
            .unwrap()
            .1;
        assert_eq!(
            signature,
            read(&dir, "query-signature.txt").trim(),
            "{}: presigned signature",
            case.name
        );
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} presigning cases");
}
