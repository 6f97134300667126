//! (placeholder: plan)
