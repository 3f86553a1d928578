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
}
