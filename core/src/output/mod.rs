//! Reading what a `vmaf`-like tool wrote (JSON, XML, CSV) into [`crate::scores::Scores`].
