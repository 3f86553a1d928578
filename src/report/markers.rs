//! What changed about a case since the last morning (issue 42): new, reopened, escalated (with
//! its note), waiting for an approval, or created by a decision reviewers made. The run finds
//! them in the store once it has stored its cases (the decisions layer reads them); the email
//! shows them beside each case and counts them on its first screen.

/// One thing to know about a case this morning.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Marker {
    /// First listed by this run.
    New,
    /// Settled (dismissed or decided) by a reviewer on other evidence; its evidence changed,
    /// so it is open again.
    Reopened {
        /// Who settled it.
        by: String,
    },
    /// A reviewer escalated it.
    Escalated {
        /// Who.
        by: String,
        /// Their note (may be empty).
        note: String,
    },
    /// A decision on it waits for a second reviewer's approval.
    Waiting {
        /// The decision (`confirm 1`).
        decision: String,
        /// Who made it (the approver must be someone else).
        by: String,
    },
    /// New or reopened, and about a payment or line a reviewer's recent decision touched (on
    /// this case or another): what that decision left (a confirmation that shows another
    /// amount, say).
    AfterDecision {
        /// The decision (`confirm 1`).
        decision: String,
        /// Who made it.
        by: String,
        /// The case it was made on.
        case: String,
    },
}

impl Marker {
    /// The short badge: `NEW`, `REOPENED`, `ESCALATED`, `WAITING FOR APPROVAL`, `AFTER A
    /// DECISION`.
    pub fn badge(&self) -> &'static str {
        match self {
            Marker::New => "NEW",
            Marker::Reopened { .. } => "REOPENED",
            Marker::Escalated { .. } => "ESCALATED",
            Marker::Waiting { .. } => "WAITING FOR YOUR APPROVAL",
            Marker::AfterDecision { .. } => "AFTER A DECISION",
        }
    }

    /// The sentence beside the badge (raw text: escape it for its format); `None` for
    /// [`Marker::New`], whose badge says it all.
    pub fn text(&self) -> Option<String> {
        match self {
            Marker::New => None,
            Marker::Reopened { by } => Some(format!(
                "{by} settled it on other evidence; the evidence changed"
            )),
            Marker::Escalated { by, note } if note.trim().is_empty() => {
                Some(format!("escalated by {by}"))
            }
            Marker::Escalated { by, note } => Some(format!("escalated by {by}: \"{note}\"")),
            Marker::Waiting { decision, by } => Some(format!(
                "{by} decided \"{decision}\"; a second reviewer must approve it"
            )),
            Marker::AfterDecision { decision, by, case } => {
                Some(format!("follows {by}'s \"{decision}\" on case {case}"))
            }
        }
    }

    /// The badge and its sentence on one line: `ESCALATED: escalated by ana: "ask treasury"`.
    pub fn line(&self) -> String {
        match self.text() {
            Some(t) => format!("{}: {t}", self.badge()),
            None => self.badge().to_string(),
        }
    }
}

/// The markers of a night's cases by case key. A case that is only new (every case on a data
/// set's first night) is a key in a set, not a list of its own: 800,000 such lists were 0.3 GB
/// of a gather.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseMarkers {
    /// The cases whose one marker is [`Marker::New`].
    new_only: std::collections::HashSet<compact_str::CompactString>,
    /// Every other case's markers, in the order they were found.
    listed: std::collections::HashMap<compact_str::CompactString, Vec<Marker>>,
}

/// The markers of a case that is only new.
static NEW_ONLY: [Marker; 1] = [Marker::New];

impl CaseMarkers {
    /// The markers of the case `key` (empty: nothing changed).
    pub fn of(&self, key: &str) -> &[Marker] {
        if self.new_only.contains(key) {
            return &NEW_ONLY;
        }
        self.listed.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Marks the case `key` new (its first marker).
    pub fn new_case(&mut self, key: &str) {
        match self.listed.get_mut(key) {
            Some(list) => list.push(Marker::New),
            None => {
                self.new_only.insert(key.into());
            }
        }
    }

    /// The markers of the case `key`, to add to (a case only new becomes a list).
    pub fn list_mut(&mut self, key: &str) -> &mut Vec<Marker> {
        let was_new = self.new_only.remove(key);
        self.listed.entry(key.into()).or_insert_with(|| {
            if was_new {
                vec![Marker::New]
            } else {
                Vec::new()
            }
        })
    }

    /// Each case's markers sorted, each once; a case without one left out, and a case whose
    /// one marker is "new" kept as a key.
    pub fn finish(&mut self) {
        let mut only_new = Vec::new();
        self.listed.retain(|key, list| {
            list.sort();
            list.dedup();
            if list.as_slice() == [Marker::New] {
                only_new.push(key.clone());
                return false;
            }
            !list.is_empty()
        });
        self.new_only.extend(only_new);
    }

    /// Adds `other`'s markers (a range's days): each marker of a case once, sorted.
    pub fn extend(&mut self, other: CaseMarkers) {
        for key in other.new_only {
            self.list_mut(&key).push(Marker::New);
        }
        for (key, list) in other.listed {
            self.list_mut(&key).extend(list);
        }
        self.finish();
    }
}

/// How many cases carry each kind of marker, for the email's first screen: `2 new · 1
/// reopened · 1 waiting for your approval` (`None` when no case carries one).
pub fn summary<'a>(markers: impl IntoIterator<Item = &'a [Marker]>) -> Option<String> {
    let mut counts = [0usize; 5];
    for list in markers {
        let mut seen = [false; 5];
        for m in list {
            let k = match m {
                Marker::New => 0,
                Marker::Reopened { .. } => 1,
                Marker::Escalated { .. } => 2,
                Marker::Waiting { .. } => 3,
                Marker::AfterDecision { .. } => 4,
            };
            if !seen[k] {
                seen[k] = true;
                counts[k] += 1;
            }
        }
    }
    const NAMES: [&str; 5] = [
        "new",
        "reopened",
        "escalated",
        "waiting for your approval",
        "after yesterday's decisions",
    ];
    let parts: Vec<String> = counts
        .iter()
        .zip(NAMES)
        .filter(|(n, _)| **n > 0)
        .map(|(n, name)| format!("{} {name}", crate::money::count(*n)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_cases_not_markers() {
        let a = vec![
            Marker::New,
            Marker::AfterDecision {
                decision: "confirm 1".into(),
                by: "ana".into(),
                case: "C-1".into(),
            },
        ];
        let b = vec![
            Marker::Waiting {
                decision: "failed".into(),
                by: "bo".into(),
            },
            Marker::Waiting {
                decision: "confirm 2".into(),
                by: "cy".into(),
            },
        ];
        let c: Vec<Marker> = vec![Marker::New];
        assert_eq!(
            summary([a.as_slice(), b.as_slice(), c.as_slice()]).as_deref(),
            Some("2 new · 1 waiting for your approval · 1 after yesterday's decisions")
        );
        assert_eq!(summary([[].as_slice()]), None);
    }

    #[test]
    fn an_escalation_shows_its_note() {
        let m = Marker::Escalated {
            by: "ana".into(),
            note: "ask treasury".into(),
        };
        assert_eq!(m.line(), "ESCALATED: escalated by ana: \"ask treasury\"");
        let bare = Marker::Escalated {
            by: "ana".into(),
            note: " ".into(),
        };
        assert_eq!(bare.line(), "ESCALATED: escalated by ana");
    }

    /// A case only new reads as `[new]` without a list of its own; a second marker makes it a
    /// list that keeps "new" first; merging a range's days keeps each marker once.
    #[test]
    fn a_case_only_new_is_a_key_and_gains_a_list_with_its_second_marker() {
        let waiting = Marker::Waiting {
            decision: "confirm 1".into(),
            by: "ana".into(),
        };
        let mut m = CaseMarkers::default();
        m.new_case("C-1");
        m.new_case("C-2");
        m.list_mut("C-2").push(waiting.clone());
        m.list_mut("C-3").push(Marker::Reopened { by: "bo".into() });
        m.list_mut("C-4");
        m.finish();
        assert_eq!(m.of("C-1"), [Marker::New]);
        assert_eq!(m.of("C-2"), [Marker::New, waiting.clone()]);
        assert_eq!(m.of("C-3"), [Marker::Reopened { by: "bo".into() }]);
        assert!(m.of("C-4").is_empty() && m.of("C-9").is_empty());
        assert_eq!((m.new_only.len(), m.listed.len()), (1, 2), "{m:?}");

        let mut day2 = CaseMarkers::default();
        day2.new_case("C-1");
        day2.new_case("C-3");
        day2.list_mut("C-1").push(waiting.clone());
        m.extend(day2);
        assert_eq!(m.of("C-1"), [Marker::New, waiting]);
        assert_eq!(
            m.of("C-3"),
            [Marker::New, Marker::Reopened { by: "bo".into() }]
        );
    }
}
