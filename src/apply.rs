//! (placeholder: apply)
