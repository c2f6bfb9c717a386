//! The stored forms of a run's progress policy (part of its definition) and of what its
//! progress checks remember ([`Tracker`], part of its counters): a resumed attempt, in any
//! process, runs under the same policy and goes on judging repeats, cycles and streaks where the
//! last one left them.
//!
//! # Invariants
//!
//! - A tracker that is empty, and a policy that is the default (a run without a progress
//!   policy), are not stored at all, so such a run's counters and definition read exactly as
//!   before these checks existed.
//! - A stored policy that does not validate decodes as `None` (corrupt), never as a policy.
//! - `decode(encode(t)) == t` for every tracker the ledger builds.
//! - Decoding never panics: signatures that repeat, indexes out of range, a digest that is not
//!   32 hexadecimal digits, or a signature whose tool name is invalid give `None`, which the
//!   caller reports as corrupt counters.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::guard::{Entry, Seen, Tracker};
use crate::progress::Progress;

/// A progress policy as stored.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoredPolicy {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    by_result: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cycles: Option<(u32, u32)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error_streak: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    nudge: bool,
}

/// The stored form of `policy`, or `None` for the default.
pub(super) fn encode_policy(policy: &Progress) -> Option<StoredPolicy> {
    if *policy == Progress::exact() {
        return None;
    }
    Some(StoredPolicy {
        by_result: policy.by_result_tools().map(|(tool, polls)| (tool.to_owned(), polls)).collect(),
        cycles: policy.cycle_rule(),
        error_streak: policy.streak_rule(),
        nudge: policy.nudges(),
    })
}

/// The policy `stored` holds, or `None` if it does not validate.
pub(super) fn decode_policy(stored: StoredPolicy) -> Option<Progress> {
    let mut policy = stored
        .by_result
        .into_iter()
        .fold(Progress::exact(), |policy, (tool, polls)| policy.by_result(tool, polls));
    if let Some((longest, repeats)) = stored.cycles {
        policy = policy.cycles(longest, repeats);
    }
    if let Some(calls) = stored.error_streak {
        policy = policy.error_streak(calls);
    }
    let policy = policy.nudge(stored.nudge);
    policy.validate().ok().map(|()| policy)
}

/// A tracker as stored.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoredProgress {
    /// Each signature's memory, in the order of its index.
    signatures: Vec<StoredSeen>,
    /// The recent admissions: signature index, tool-call count, whether its result was new.
    recent: Vec<(u32, u32, Option<bool>)>,
    /// Admissions whose result is not back yet: tool-call count, signature index.
    waiting: Vec<(u32, u32)>,
    streak: u32,
    nudged: bool,
}

/// One signature's memory as stored (its tool is its signature's prefix).
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSeen {
    signature: String,
    last: Option<String>,
    before: Option<String>,
    attempts: u32,
    charged: u32,
    waiting: u32,
}

fn hex(digest: &[u8; 16]) -> String {
    digest.iter().fold(String::with_capacity(32), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut digest = [0; 16];
    for (at, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * at..2 * at + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// The stored form of `tracker`, or `None` for an empty one.
pub(super) fn encode(tracker: &Tracker) -> Option<StoredProgress> {
    if tracker.is_empty() {
        return None;
    }
    let mut by_id: Vec<(&str, u32)> =
        tracker.ids.iter().map(|(signature, id)| (signature.as_str(), *id)).collect();
    by_id.sort_by_key(|(_, id)| *id);
    let signatures = by_id
        .into_iter()
        .zip(&tracker.seen)
        .map(|((signature, _), seen)| StoredSeen {
            signature: signature.to_owned(),
            last: seen.last.as_ref().map(hex),
            before: seen.before.as_ref().map(hex),
            attempts: seen.attempts,
            charged: seen.charged,
            waiting: seen.waiting,
        })
        .collect();
    Some(StoredProgress {
        signatures,
        recent: tracker.recent.iter().map(|entry| (entry.id, entry.count, entry.fresh)).collect(),
        waiting: tracker.waiting.iter().map(|(count, id)| (*count, *id)).collect(),
        streak: tracker.streak,
        nudged: tracker.nudged,
    })
}

/// The tracker `stored` holds, or `None` if it does not hold one.
pub(super) fn decode(stored: StoredProgress) -> Option<Tracker> {
    let mut tracker = Tracker::default();
    let known = u32::try_from(stored.signatures.len()).ok()?;
    for (id, seen) in (0..known).zip(stored.signatures) {
        let (tool, _) = seen.signature.split_once(':')?;
        crate::tool::check_name(tool).ok()?;
        let digest = |text: Option<String>| text.map(|text| unhex(&text)).map_or(Some(None), |d| d.map(Some));
        let entry = Seen {
            tool: Arc::from(tool),
            last: digest(seen.last)?,
            before: digest(seen.before)?,
            attempts: seen.attempts,
            charged: seen.charged,
            waiting: seen.waiting,
        };
        if tracker.ids.insert(seen.signature, id).is_some() {
            return None;
        }
        tracker.seen.push(entry);
    }
    let recent: VecDeque<Entry> = stored
        .recent
        .into_iter()
        .map(|(id, count, fresh)| (id < known).then_some(Entry { id, count, fresh }))
        .collect::<Option<_>>()?;
    let waiting: BTreeMap<u32, u32> = stored
        .waiting
        .into_iter()
        .map(|(count, id)| (id < known).then_some((count, id)))
        .collect::<Option<_>>()?;
    tracker.recent = recent;
    tracker.waiting = waiting;
    tracker.streak = stored.streak;
    tracker.nudged = stored.nudged;
    Some(tracker)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker() -> Tracker {
        let mut tracker = Tracker::default();
        tracker.ids.insert("poll:{\"job\":1}".to_owned(), 0);
        tracker.ids.insert("read:{}".to_owned(), 1);
        let seen = |tool: &str, last: Option<[u8; 16]>| Seen {
            tool: Arc::from(tool),
            last,
            before: None,
            attempts: 2,
            charged: 1,
            waiting: 0,
        };
        tracker.seen.push(seen("poll", Some([7; 16])));
        tracker.seen.push(seen("read", None));
        tracker.recent.push_back(Entry { id: 0, count: 1, fresh: Some(true) });
        tracker.recent.push_back(Entry { id: 1, count: 2, fresh: None });
        tracker.waiting.insert(2, 1);
        tracker.streak = 2;
        tracker.nudged = true;
        tracker
    }

    #[test]
    fn a_tracker_round_trips_and_an_empty_one_is_not_stored() {
        let tracker = tracker();
        let stored = encode(&tracker).expect("not empty");
        let text = serde_json::to_string(&stored).unwrap_or_default();
        let read: StoredProgress = serde_json::from_str(&text).expect("reads back");
        assert_eq!(decode(read), Some(tracker));
        assert_eq!(encode(&Tracker::default()), None);
    }

    #[test]
    fn a_policy_round_trips_the_default_is_not_stored_and_an_invalid_one_is_refused() {
        let policy = Progress::recommended().by_result("poll", 4).nudge(true);
        let stored = encode_policy(&policy).expect("not the default");
        let text = serde_json::to_string(&stored).unwrap_or_default();
        assert_eq!(text, r#"{"by_result":{"poll":4},"cycles":[3,3],"error_streak":3,"nudge":true}"#);
        let read: StoredPolicy = serde_json::from_str(&text).expect("reads back");
        assert_eq!(decode_policy(read), Some(policy));
        assert_eq!(encode_policy(&Progress::exact()), None);
        let invalid: StoredPolicy = serde_json::from_str(r#"{"by_result":{"poll":0}}"#).expect("well-formed");
        assert_eq!(decode_policy(invalid), None);
        let invalid: StoredPolicy = serde_json::from_str(r#"{"cycles":[1,3]}"#).expect("well-formed");
        assert_eq!(decode_policy(invalid), None);
    }

    #[test]
    fn a_damaged_tracker_is_refused() {
        let damaged = [
            r#"{"signatures":[{"signature":"a:1","last":"zz","before":null,"attempts":1,"charged":1,"waiting":0}],"recent":[],"waiting":[],"streak":0,"nudged":false}"#,
            r#"{"signatures":[],"recent":[[0,1,null]],"waiting":[],"streak":0,"nudged":false}"#,
            r#"{"signatures":[],"recent":[],"waiting":[[1,0]],"streak":0,"nudged":false}"#,
            r#"{"signatures":[{"signature":"no tool","last":null,"before":null,"attempts":1,"charged":1,"waiting":0}],"recent":[],"waiting":[],"streak":0,"nudged":false}"#,
            r#"{"signatures":[{"signature":"a:1","last":null,"before":null,"attempts":1,"charged":1,"waiting":0},{"signature":"a:1","last":null,"before":null,"attempts":1,"charged":1,"waiting":0}],"recent":[],"waiting":[],"streak":0,"nudged":false}"#,
        ];
        for text in damaged {
            let stored: StoredProgress = serde_json::from_str(text).expect("well-formed JSON");
            assert_eq!(decode(stored), None, "{text}");
        }
    }
}
