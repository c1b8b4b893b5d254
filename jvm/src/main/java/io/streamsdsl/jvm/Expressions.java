package io.streamsdsl.jvm;

import java.util.Arrays;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.DataType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/** Columns that call the jar's static methods from Spark's generated code. */
final class Expressions {
    private Expressions() {
    }

    /**
     * A call of {@code owner.method(args...)} inside Spark's generated code, as Spark calls its
     * own helpers ({@code static_invoke} in a plan): no conversion of the arguments and no
     * wrapper, unlike a user-defined function. The arguments arrive as Spark holds them
     * ({@code byte[]} for binary, {@code UTF8String} for strings, null for a null value); the
     * call is deterministic.
     */
    static Column staticCall(Class<?> owner, String method, DataType type, boolean nullable, Column... args) {
        return staticCall(owner, method, type, nullable, true, args);
    }

    /**
     * {@link #staticCall(Class, String, DataType, boolean, Column...)}, declared to Spark as
     * deterministic or not. A call declared not deterministic keeps the projection it is in apart
     * from the operators around it: Spark neither pushes a filter into that projection nor merges
     * it with another.
     */
    static Column staticCall(Class<?> owner, String method, DataType type, boolean nullable, boolean deterministic,
                             Column... args) {
        Seq<Expression> children = CollectionConverters.asScala(
                Arrays.stream(args).map(ExpressionUtils::expression).toList()).toSeq();
        Seq<AbstractDataType> noTypes = CollectionConverters.asScala(java.util.List.<AbstractDataType>of()).toSeq();
        return ExpressionUtils.column(new StaticInvoke(owner, type, method, children, noTypes, false, nullable, deterministic,
                Option.empty()));
    }
}
