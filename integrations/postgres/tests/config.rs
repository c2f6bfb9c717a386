//! Configuration without a server: URLs, environment variables, refusals, and the password kept
//! out of every output.

use std::collections::HashMap;
use std::time::Duration;

use loopbound_postgres::{Config, ConfigError, DEFAULT_LEASE, DEFAULT_POOL_SIZE, Error};

const PASSWORD: &str = "Xq7-long-Secret_Pw9";

/// Fails if any 8-character run of the password appears in `text`.
fn assert_no_password(text: &str) {
    let chars: Vec<char> = PASSWORD.chars().collect();
    for window in chars.windows(8) {
        let run: String = window.iter().collect();
        assert!(!text.contains(&run), "{run:?} of the password appears in {text:?}");
    }
}

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |key| map.get(key).cloned()
}

#[test]
fn a_url_prints_with_its_password_redacted() {
    let config = Config::new(&format!("postgres://journal:{PASSWORD}@127.0.0.1:5433/runs")).unwrap();
    assert_eq!(config.to_string(), "postgres://journal:[redacted]@127.0.0.1:5433/runs");
    let debug = format!("{config:?}");
    assert!(
        debug.starts_with("Config { url: \"postgres://journal:[redacted]@127.0.0.1:5433/runs\""),
        "{debug}"
    );
    assert_no_password(&debug);
    assert_no_password(&format!("{config:#?}"));
}

#[test]
fn a_key_value_string_is_accepted_and_redacted_too() {
    let config =
        Config::new(&format!("host=db.internal port=6543 user=w password={PASSWORD} dbname=j")).unwrap();
    assert_eq!(config.to_string(), "postgres://w:[redacted]@db.internal:6543/j");
    assert_no_password(&format!("{config:?}"));
}

#[test]
fn a_url_without_password_or_database_prints_what_it_has() {
    let config = Config::new("postgresql://worker@localhost").unwrap();
    assert_eq!(config.to_string(), "postgres://worker@localhost:5432/worker");
}

#[test]
fn malformed_urls_are_refused_without_quoting_them() {
    for url in [
        format!("postgres://u:{PASSWORD}@127.0.0.1:notaport/db"),
        format!("mysql://u:{PASSWORD}@127.0.0.1/db"),
        format!("postgres://u:{PASSWORD}@127.0.0.1/db?nosuchoption=1"),
        String::new(),
    ] {
        let error = Config::new(&url).unwrap_err();
        assert_eq!(error, ConfigError::InvalidUrl, "{url}");
        assert_no_password(&error.to_string());
        assert_no_password(&format!("{error:?}"));
        assert_no_password(&Error::from(error).to_string());
    }
}

#[test]
fn a_url_that_requires_tls_is_refused() {
    let error = Config::new(&format!("postgres://u:{PASSWORD}@127.0.0.1/db?sslmode=require")).unwrap_err();
    assert_eq!(error, ConfigError::TlsUnsupported);
    assert_eq!(error.to_string(), "the database URL requires TLS (sslmode=require), which is not supported");
    assert!(Config::new("postgres://u@127.0.0.1/db?sslmode=disable").is_ok());
}

#[test]
fn the_environment_gives_the_url_the_lease_and_the_pool_size() {
    let url = format!("postgres://u:{PASSWORD}@127.0.0.1:5432/db");
    let config = Config::from_lookup(lookup(&[("LOOPBOUND_DATABASE_URL", &url)])).unwrap();
    assert_eq!((config.lease(), config.pool_size()), (DEFAULT_LEASE, DEFAULT_POOL_SIZE));
    assert_eq!(config.connect_timeout(), Duration::from_secs(10));

    let config = Config::from_lookup(lookup(&[
        ("LOOPBOUND_DATABASE_URL", &url),
        ("LOOPBOUND_LEASE_SECS", " 5 "),
        ("LOOPBOUND_DATABASE_POOL_SIZE", "3"),
    ]))
    .unwrap();
    assert_eq!((config.lease(), config.pool_size()), (Duration::from_secs(5), 3));
}

#[test]
fn missing_or_invalid_variables_are_named() {
    assert_eq!(
        Config::from_lookup(lookup(&[("LOOPBOUND_DATABASE_URL", "  ")])).unwrap_err(),
        ConfigError::Missing { variable: "LOOPBOUND_DATABASE_URL" }
    );
    for (variable, value) in [
        ("LOOPBOUND_LEASE_SECS", "0"),
        ("LOOPBOUND_LEASE_SECS", "1.5"),
        ("LOOPBOUND_DATABASE_POOL_SIZE", "-2"),
    ] {
        let error =
            Config::from_lookup(lookup(&[("LOOPBOUND_DATABASE_URL", "postgres://u@h/d"), (variable, value)]))
                .unwrap_err();
        assert_eq!(error, ConfigError::InvalidNumber { setting: variable });
        assert_eq!(error.to_string(), format!("{variable} must be a whole number above zero"));
    }
}

#[test]
fn zero_sizes_and_durations_are_refused_in_code() {
    let config = Config::new("postgres://u@h/d").unwrap();
    assert!(matches!(config.clone().with_lease(Duration::ZERO), Err(ConfigError::InvalidNumber { .. })));
    assert!(matches!(config.clone().with_pool_size(0), Err(ConfigError::InvalidNumber { .. })));
    assert!(matches!(
        config.clone().with_timeouts(Duration::ZERO, Duration::from_secs(1)),
        Err(ConfigError::InvalidNumber { .. })
    ));
    let tuned = config.with_timeouts(Duration::from_millis(250), Duration::from_secs(2)).unwrap();
    assert_eq!(
        (tuned.connect_timeout(), tuned.wait_timeout()),
        (Duration::from_millis(250), Duration::from_secs(2))
    );
}

/// Run as a child with `LOOPBOUND_LEASE_SECS` set: `new` and `from_env` give its lease.
#[test]
fn new_and_from_env_read_the_same_lease_setting() {
    if std::env::var("LOOPBOUND_CONFIG_TEST_CHILD").is_ok() {
        let url = "postgres://w@127.0.0.1:5432/j";
        let from_env = Config::from_env().expect("the child's environment is valid");
        let new = Config::new(url).expect("a valid URL");
        assert_eq!((new.lease(), from_env.lease()), (Duration::from_secs(7), Duration::from_secs(7)));
        assert_eq!((new.pool_size(), from_env.pool_size()), (3, 3));
        let explicit = new.with_lease(Duration::from_secs(2)).expect("a valid lease");
        assert_eq!(explicit.lease(), Duration::from_secs(2), "with_lease overrides the setting");
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "new_and_from_env_read_the_same_lease_setting", "--test-threads=1"])
        .env("LOOPBOUND_CONFIG_TEST_CHILD", "1")
        .env("LOOPBOUND_DATABASE_URL", "postgres://w@127.0.0.1:5432/j")
        .env("LOOPBOUND_LEASE_SECS", "7")
        .env("LOOPBOUND_DATABASE_POOL_SIZE", "3")
        .status()
        .expect("the test binary runs again");
    assert!(status.success(), "the child's assertions hold");
}
