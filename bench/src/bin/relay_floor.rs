//! `relay-floor`: what this machine's kernel charges a process for moving bytes from one TCP
//! socket to another over loopback, with nothing done to them: the floor under any mirror's CPU
//! per GB (strait receives every batch from the source and sends it to the target).
//!
//! One process, three threads: a source that writes `--gb` GB into a socket in 1 MiB writes, a
//! sink that reads and drops, and the relay between them, whose CPU (user and system, of its
//! thread alone: `getrusage(RUSAGE_THREAD)`) is reported per GB for each way of relaying:
//! `read`/`write` with a buffer of each `--chunk` size, and `splice` through a pipe (the bytes
//! never enter user space). One JSON line per way.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// GB (10^9 bytes) to relay per way.
    #[arg(long, default_value_t = 1.0)]
    gb: f64,
    /// Buffer sizes for read/write relays, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [16384usize, 65536, 1048576])]
    chunk: Vec<usize>,
}

fn cpu_of_this_thread() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct it is given and nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// A source writing `total` bytes and a sink draining what it gets: the two ends of one relay.
fn ends(
    total: u64,
) -> anyhow::Result<(
    TcpStream,
    TcpStream,
    thread::JoinHandle<()>,
    thread::JoinHandle<u64>,
)> {
    let source = TcpListener::bind("127.0.0.1:0")?;
    let sink = TcpListener::bind("127.0.0.1:0")?;
    let (source_addr, sink_addr) = (source.local_addr()?, sink.local_addr()?);
    let writer = thread::spawn(move || {
        let (mut out, _) = source.accept().expect("accept");
        let block = vec![0x5au8; 1 << 20];
        let mut left = total;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            out.write_all(&block[..n]).expect("source write");
            left -= n as u64;
        }
    });
    let reader = thread::spawn(move || {
        let (mut inp, _) = sink.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        loop {
            match inp.read(&mut buf) {
                Ok(0) | Err(_) => return got,
                Ok(n) => got += n as u64,
            }
        }
    });
    Ok((
        TcpStream::connect(source_addr)?,
        TcpStream::connect(sink_addr)?,
        writer,
        reader,
    ))
}

fn report(way: &str, chunk: usize, moved: u64, got: u64, before: (f64, f64), after: (f64, f64)) {
    let (user, sys) = (after.0 - before.0, after.1 - before.1);
    let gb = moved as f64 / 1e9;
    println!(
        "{}",
        serde_json::json!({
            "way": way, "chunk": chunk, "bytes": moved, "sink_bytes": got,
            "user_s": user, "sys_s": sys, "core_s_per_gb": (user + sys) / gb,
        })
    );
}

fn read_write(total: u64, chunk: usize) -> anyhow::Result<()> {
    let (mut from, mut to, writer, reader) = ends(total)?;
    let mut buf = vec![0u8; chunk];
    let mut moved = 0u64;
    let before = cpu_of_this_thread();
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        to.write_all(&buf[..n])?;
        moved += n as u64;
    }
    let after = cpu_of_this_thread();
    drop(to);
    writer.join().ok();
    let got = reader.join().unwrap_or(0);
    report("read/write", chunk, moved, got, before, after);
    Ok(())
}

fn splice(total: u64) -> anyhow::Result<()> {
    let (from, to, writer, reader) = ends(total)?;
    let mut pipe = [0i32; 2];
    // SAFETY: pipe() fills the two-element array; fcntl and splice take plain descriptors.
    if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
        anyhow::bail!("pipe: {}", std::io::Error::last_os_error());
    }
    const PIPE: usize = 1 << 20;
    unsafe { libc::fcntl(pipe[1], libc::F_SETPIPE_SZ, PIPE as libc::c_int) };
    let mut moved = 0u64;
    let before = cpu_of_this_thread();
    loop {
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                pipe[1],
                std::ptr::null_mut(),
                PIPE,
                libc::SPLICE_F_MOVE,
            )
        };
        if n < 0 {
            anyhow::bail!("splice in: {}", std::io::Error::last_os_error());
        }
        if n == 0 {
            break;
        }
        let mut left = n as usize;
        while left > 0 {
            let m = unsafe {
                libc::splice(
                    pipe[0],
                    std::ptr::null_mut(),
                    to.as_raw_fd(),
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if m <= 0 {
                anyhow::bail!("splice out: {}", std::io::Error::last_os_error());
            }
            left -= m as usize;
        }
        moved += n as u64;
    }
    let after = cpu_of_this_thread();
    drop(to);
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    writer.join().ok();
    let got = reader.join().unwrap_or(0);
    report("splice", PIPE, moved, got, before, after);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let total = (args.gb * 1e9) as u64;
    for &chunk in &args.chunk {
        read_write(total, chunk)?;
    }
    splice(total)
}
